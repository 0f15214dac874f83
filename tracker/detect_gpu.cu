// The GPU detection path's array steps (detect_gpu.py): what dog.py, detect.py and spot_scale.py did with CuPy
// element-wise operations, reductions and fancy indexing, each of which CuPy compiles with NVRTC at first use
// (one compilation per operation, dtype and rank: 60 of them, 6.6 s, on a fresh H100). Sizes, strides and
// scalars are arguments, so this one module, shipped compiled, serves every frame shape and scale.
//
// Arrays are float32 unless named otherwise. A "view" is a 3-D strided array (n0, n1, n2) with element strides
// (s0, s1, s2) from its first element (a CuPy slice of a frame, or a frame itself). Rounding follows NumPy's
// results of the CPU path operation by operation (__fadd_rn and the like keep nvcc from fusing a multiply and an
// add, which NumPy never does), so that a step given the same input gives the CPU's bits.

#define GRID_STRIDE(i, total)                                                                                 \
    for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < (total);                       \
         i += (long long)gridDim.x * blockDim.x)

// The offset of the view's element number i (C order).
__device__ __forceinline__ long long view_offset(long long i, long long n1, long long n2, long long s0, long long s1,
                                                 long long s2) {
    const long long k = i % n2;
    const long long rest = i / n2;
    return (rest / n1) * s0 + (rest % n1) * s1 + k * s2;
}

template <typename T> __device__ __forceinline__ bool finite_value(T) { return true; }
template <> __device__ __forceinline__ bool finite_value<float>(float v) { return isfinite(v); }
template <> __device__ __forceinline__ bool finite_value<double>(double v) { return isfinite(v); }

// Step "as float32" (every frame; the halves of spot_scale's frames): a view copied into a C-contiguous float32
// array, converted as NumPy's astype does (round to nearest).
template <typename T>
__device__ void to_float32(const T* __restrict__ in, float* __restrict__ out, long long n0, long long n1,
                           long long n2, long long s0, long long s1, long long s2) {
    GRID_STRIDE(i, n0 * n1 * n2) { out[i] = (float)in[view_offset(i, n1, n2, s0, s1, s2)]; }
}

// Step "input check" (detect_spots' finite check, the pipeline's constant-frame count): bit 1 of *flags set if
// some value differs from the first, bit 2 if some value is NaN or infinite.
template <typename T>
__device__ void inspect(const T* __restrict__ in, int* __restrict__ flags, long long n0, long long n1, long long n2,
                        long long s0, long long s1, long long s2) {
    const T first = in[0];
    int mine = 0;
    GRID_STRIDE(i, n0 * n1 * n2) {
        const T v = in[view_offset(i, n1, n2, s0, s1, s2)];
        if (v != first) mine |= 1;
        if (!finite_value(v)) mine |= 2;
    }
    if (mine) atomicOr(flags, mine);
}

#define PER_TYPE(SUFFIX, T)                                                                                     \
    extern "C" __global__ void to_float32_##SUFFIX(const T* __restrict__ in, float* __restrict__ out,          \
                                                   long long n0, long long n1, long long n2, long long s0,      \
                                                   long long s1, long long s2) {                                \
        to_float32<T>(in, out, n0, n1, n2, s0, s1, s2);                                                         \
    }                                                                                                           \
    extern "C" __global__ void inspect_##SUFFIX(const T* __restrict__ in, int* __restrict__ flags, long long n0, \
                                                long long n1, long long n2, long long s0, long long s1,         \
                                                long long s2) {                                                 \
        inspect<T>(in, flags, n0, n1, n2, s0, s1, s2);                                                          \
    }

PER_TYPE(int8, signed char)
PER_TYPE(uint8, unsigned char)
PER_TYPE(int16, short)
PER_TYPE(uint16, unsigned short)
PER_TYPE(int32, int)
PER_TYPE(uint32, unsigned int)
PER_TYPE(int64, long long)
PER_TYPE(uint64, unsigned long long)
PER_TYPE(float32, float)
PER_TYPE(float64, double)

// Step "difference": the DoG (centre − surround) and the split's sharp band-pass (fine − smoothed).
extern "C" __global__ void subtract(const float* __restrict__ a, const float* __restrict__ b, float* __restrict__ out,
                                    long long n) {
    GRID_STRIDE(i, n) { out[i] = __fsub_rn(a[i], b[i]); }
}

// Step "quality map, centred": (response − median) / relative noise, the relative noise computed in place from
// its separable factors (dog.relative_noise): sqrt(Σ_t c_t · a_t[z] · b_t[y] · d_t[x]) over the terms t = 0, 1, 2,
// in float64 as NumPy computes it there (a float64 coefficient times float32 sums), then rounded to float32.
// sums: the three terms' per-axis sums, term by term, each as n0 values (z), then n1 (y), then n2 (x).
extern "C" __global__ void centred_response(const float* __restrict__ response, float* __restrict__ out,
                                            float median, const float* __restrict__ sums, double c0, double c1,
                                            double c2, long long n0, long long n1, long long n2) {
    const long long length = n0 + n1 + n2;
    GRID_STRIDE(i, n0 * n1 * n2) {
        const long long x = i % n2;
        const long long y = (i / n2) % n1;
        const long long z = i / (n1 * n2);
        double variance = 0.0;
        for (int term = 0; term < 3; ++term) {
            const float* t = sums + term * length;
            double product = term == 0 ? c0 : (term == 1 ? c1 : c2);
            product = __dmul_rn(product, (double)t[z]);
            product = __dmul_rn(product, (double)t[n0 + y]);
            product = __dmul_rn(product, (double)t[n0 + n1 + x]);
            variance = __dadd_rn(variance, product);
        }
        const float relative = (float)sqrt(fmax(variance, 0.0));
        out[i] = __fdiv_rn(__fsub_rn(response[i], median), relative);
    }
}

// Step "standardise" (in place): (x − centre) / scale; the quality map's division by its noise (centre 0) and
// the split's sharp response in units of its noise.
extern "C" __global__ void standardize(float* __restrict__ x, float centre, float scale, long long n) {
    GRID_STRIDE(i, n) { x[i] = __fdiv_rn(__fsub_rn(x[i], centre), scale); }
}

// Step "noise of the derivative" (dog.gradient_variance): 0.5 (ahead − behind) of two views of one shape and
// strides (the quality map two voxels apart along one axis), into a contiguous sample.
extern "C" __global__ void half_difference(const float* __restrict__ ahead, const float* __restrict__ behind,
                                           float* __restrict__ out, long long n0, long long n1, long long n2,
                                           long long s0, long long s1, long long s2) {
    GRID_STRIDE(i, n0 * n1 * n2) {
        const long long o = view_offset(i, n1, n2, s0, s1, s2);
        out[i] = __fmul_rn(0.5f, __fsub_rn(ahead[o], behind[o]));
    }
}

// Step "median absolute deviation": |x − centre| (in place allowed).
extern "C" __global__ void absolute_deviation(const float* in, float* out, float centre, long long n) {
    GRID_STRIDE(i, n) { out[i] = fabsf(__fsub_rn(in[i], centre)); }
}

// Step "local maxima": the voxels where image equals its maximum filter, image ≥ floor and other ≥ other_floor,
// as C-order linear indices in no particular order (the caller sorts them); *count is how many there are (only
// the first `capacity` are written).
extern "C" __global__ void local_maxima(const float* __restrict__ image, const float* __restrict__ image_max,
                                        float floor, const float* __restrict__ other, float other_floor,
                                        long long n, long long* __restrict__ found,
                                        unsigned long long* __restrict__ count, long long capacity) {
    GRID_STRIDE(i, n) {
        const float v = image[i];
        if (v == image_max[i] && v >= floor && other[i] >= other_floor) {
            const unsigned long long slot = atomicAdd(count, 1ULL);
            if (slot < (unsigned long long)capacity) found[slot] = i;
        }
    }
}

// Step "values at peaks": image[index] for linear indices.
extern "C" __global__ void take(const float* __restrict__ image, const long long* __restrict__ index,
                                float* __restrict__ out, long long n) {
    GRID_STRIDE(i, n) { out[i] = image[index[i]]; }
}

// Step "sub-voxel refinement" (detect.quadratic_offsets): per peak and axis, the vertex of the parabola through
// the peak and its two neighbours (float64), where the curvature is negative, clipped to ±0.5; 0 on a face and
// on an axis of fewer than 3 voxels. coords: (n, 3) int64; out: (n, 3) float64. image: C-contiguous.
extern "C" __global__ void quadratic_offsets(const float* __restrict__ image, const long long* __restrict__ coords,
                                             double* __restrict__ out, long long n, long long n0, long long n1,
                                             long long n2) {
    GRID_STRIDE(i, n * 3) {
        const long long peak = i / 3;
        const int axis = (int)(i % 3);
        const long long size = axis == 0 ? n0 : (axis == 1 ? n1 : n2);
        const long long stride = axis == 0 ? n1 * n2 : (axis == 1 ? n2 : 1);
        const long long* c = coords + 3 * peak;
        const long long centre = c[axis];
        if (size < 3 || centre == 0 || centre == size - 1) {
            out[i] = 0.0;
            continue;
        }
        const long long at = (c[0] * n1 + c[1]) * n2 + c[2];
        const double f0 = (double)image[at];
        const double fm = (double)image[at - stride];
        const double fp = (double)image[at + stride];
        const double curvature = __dadd_rn(__dsub_rn(fm, __dmul_rn(2.0, f0)), fp);
        double delta = 0.0;
        if (curvature < 0.0) delta = __ddiv_rn(__dmul_rn(0.5, __dsub_rn(fm, fp)), curvature);
        out[i] = fmin(fmax(delta, -0.5), 0.5);
    }
}

// Step "profiles" (spot_scale._profiles): per spot and position k = 0 .. 2 half along `axis`, the sum of the
// view over ±box_b, ±box_c voxels in the other two axes (b < c), every index clamped to the view, as spot_scale
// sums its gathered block (summed in float64, rounded to float32). coords: (n, 3) int64; out: (n, 2 half + 1).
extern "C" __global__ void profile_sums(const float* __restrict__ view, const long long* __restrict__ coords,
                                        float* __restrict__ out, long long n, int axis, int half, int box_b,
                                        int box_c, long long n0, long long n1, long long n2, long long s0,
                                        long long s1, long long s2) {
    const long long shape[3] = {n0, n1, n2};
    const long long strides[3] = {s0, s1, s2};
    const int b = axis == 0 ? 1 : 0;
    const int c = axis == 2 ? 1 : 2;
    const long long length = 2 * half + 1;
    GRID_STRIDE(i, n * length) {
        const long long* centre = coords + 3 * (i / length);
        const long long along = min(max(centre[axis] + (i % length) - half, 0LL), shape[axis] - 1);
        const float* line = view + along * strides[axis];
        double sum = 0.0;
        for (int u = -box_b; u <= box_b; ++u) {
            const long long p = min(max(centre[b] + u, 0LL), shape[b] - 1);
            for (int v = -box_c; v <= box_c; ++v) {
                const long long q = min(max(centre[c] + v, 0LL), shape[c] - 1);
                sum += (double)line[p * strides[b] + q * strides[c]];
            }
        }
        out[i] = (float)sum;
    }
}
