// One-dimensional passes of the separable filters detection uses (ndimage_gpu.py), for float32 arrays with
// mode "nearest" (the edge voxel repeated). The array is seen as (outer, length, inner), C-contiguous, and
// filtered along `length`; one thread per output voxel. The filter's length is an argument, so one compiled
// kernel serves every scale (cupyx.scipy.ndimage bakes the length into the kernel's source: one NVRTC
// compilation per scale and axis on a fresh machine).
//
// correlate_nearest follows cupyx.scipy.ndimage.correlate1d for float32 input exactly: float32 weights, a
// float32 sum taken in weight order (sum += x * w, a fused multiply-add), so its results are the same bits.

extern "C" __global__ void correlate_nearest(const float* __restrict__ in, float* __restrict__ out,
                                             const float* __restrict__ weights, int radius, long long outer,
                                             int length, long long inner) {
    const long long total = outer * length * inner;
    for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < total;
         i += (long long)gridDim.x * blockDim.x) {
        const long long q = i % inner;
        const int p = (int)((i / inner) % length);
        const float* line = in + (i / (inner * length)) * inner * length + q;
        float sum = 0.0f;
        for (int k = 0; k <= 2 * radius; ++k) {
            const int j = min(max(p + k - radius, 0), length - 1);
            sum += line[j * inner] * weights[k];
        }
        out[i] = sum;
    }
}

// The maximum over `size` voxels starting `size / 2` before each one (scipy.ndimage's origin 0).
extern "C" __global__ void maximum_nearest(const float* __restrict__ in, float* __restrict__ out, int size,
                                           long long outer, int length, long long inner) {
    const long long total = outer * length * inner;
    const int before = size / 2;
    for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < total;
         i += (long long)gridDim.x * blockDim.x) {
        const long long q = i % inner;
        const int p = (int)((i / inner) % length);
        const float* line = in + (i / (inner * length)) * inner * length + q;
        float value = line[p * inner];
        for (int k = 0; k < size; ++k) {
            const int j = min(max(p + k - before, 0), length - 1);
            value = fmaxf(value, line[j * inner]);
        }
        out[i] = value;
    }
}
