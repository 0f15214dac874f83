// Log-domain Sinkhorn half-steps of the DGS start (dgs.py), shared by dgs.cu and dgs_anneal.cu.
#pragma once

// Vectorised variants on a padded copy (row stride ld, a multiple of 8, pad
// entries huge): each lane loads 16 bytes at a time (4 floats or 8 halves),
// two loads in flight, and rescales its running sum once per load.

__device__ __forceinline__ float h2f(unsigned short h) {
    float f;
    asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"(h));
    return f;
}

__device__ __forceinline__ void lse_accum(float* x, int cnt, float& m, float& s, float inv_e) {
    float mm = x[0];
#pragma unroll
    for (int t = 1; t < 8; ++t)
        if (t < cnt) mm = fminf(mm, x[t]);
    if (mm < m) {
        s = s > 0.0f ? s * __expf((mm - m) * inv_e) : 0.0f;
        m = mm;
    }
#pragma unroll
    for (int t = 0; t < 8; ++t)
        if (t < cnt) s += __expf((m - x[t]) * inv_e);
}

__device__ __forceinline__ void lse_finish(int lane, float m, float s, float e, float inv_e, float* out) {
    for (int off = 16; off > 0; off >>= 1) {
        float om = __shfl_xor_sync(0xffffffffu, m, off);
        float os = __shfl_xor_sync(0xffffffffu, s, off);
        float nm = fminf(m, om);
        float a = s > 0.0f ? s * __expf((nm - m) * inv_e) : 0.0f;
        float b = os > 0.0f ? os * __expf((nm - om) * inv_e) : 0.0f;
        m = nm;
        s = a + b;
    }
    if (lane == 0) *out = m - e * __logf(s);
}

// One half-step for the rows warp, warp + nwarps, ... of c (row stride ld) against `oth` (ld / 4 float4).
__device__ __forceinline__ void lse_rows4(int n, int ld, const float* __restrict__ c, const float4* oth,
                                          float* __restrict__ out, float e, int warp, int nwarps, int lane) {
    float inv_e = 1.0f / e;
    int nv = ld >> 2;
    for (int i = warp; i < n; i += nwarps) {
        const float4* row = reinterpret_cast<const float4*>(c + (long long)i * ld);
        float m = __int_as_float(0x7f800000), s = 0.0f;
        for (int q = lane; q < nv; q += 64) {
            float4 r0 = row[q], o0 = oth[q];
            bool two = q + 32 < nv;
            float4 r1 = two ? row[q + 32] : r0, o1 = two ? oth[q + 32] : o0;
            float x[8] = {r0.x - o0.x, r0.y - o0.y, r0.z - o0.z, r0.w - o0.w,
                          r1.x - o1.x, r1.y - o1.y, r1.z - o1.z, r1.w - o1.w};
            lse_accum(x, two ? 8 : 4, m, s, inv_e);
        }
        lse_finish(lane, m, s, e, inv_e, out + i);
    }
}
