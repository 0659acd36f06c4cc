/*
 * TFLite Micro's int8 bilinear resize (reference_ops::ResizeBilinearInteger). Its sums are int64
 * there; here int32 holds them exactly: |weight| <= 1536 per axis (1024 - dy with dy >= -512), so
 * the four products of an int8 pixel add up to at most 128 * (1536 + 512)**2 < 2**30 in magnitude.
 */
#include "rlx_resize_bilinear_s8.h"

void rlx_resize_bilinear_s8(const rlx_resize_bilinear_params *p, const int8_t *in, int8_t *out)
{
    const int32_t c_n = p->channels;
    const int32_t row = p->in_w * c_n;
    for (int32_t b = 0; b < p->batches; b++) {
        const int8_t *img = in + b * p->in_h * row;
        for (int32_t y = 0; y < p->out_h; y++) {
            const int8_t *r0 = img + p->y0[y] * row;
            const int8_t *r1 = img + p->y1[y] * row;
            const int32_t hy = p->dy[y], ly = 1024 - hy;
            for (int32_t x = 0; x < p->out_w; x++) {
                const int32_t hx = p->dx[x], lx = 1024 - hx;
                const int32_t w00 = ly * lx, w10 = hy * lx, w01 = ly * hx, w11 = hy * hx;
                const int8_t *a = r0 + p->x0[x] * c_n, *bb = r1 + p->x0[x] * c_n;
                const int8_t *c = r0 + p->x1[x] * c_n, *d = r1 + p->x1[x] * c_n;
                for (int32_t k = 0; k < c_n; k++) {
                    int32_t t = a[k] * w00 + bb[k] * w10 + c[k] * w01 + d[k] * w11;
                    t += t > 0 ? (1 << 19) : -(1 << 19);
                    *out++ = (int8_t)(t / (1 << 20));
                }
            }
        }
    }
}
