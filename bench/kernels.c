/* Hand-written C loops for the kernel table of `python -m bench.kernels`: each case does,
   per iteration, the same work as the autodiff program of the same name (bench/kernels.py),
   in the plain loops a programmer would write -- row loops, contiguous inner loops marked
   `#pragma omp simd` (compiled with -O3 -march=native -fopenmp-simd, no -ffast-math, so
   libm's expf/erff stay scalar calls as they are without it).

   `kernels <case> <seconds>` prints the median seconds per iteration over batches of
   iterations filling about <seconds>. Data: fixed pseudo-random floats in [-1, 1). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static double now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec + 1e-9 * t.tv_nsec;
}

static float *randn(size_t n, unsigned seed) {
  float *p = aligned_alloc(64, ((n * 4 + 63) / 64) * 64);
  unsigned s = seed * 2654435761u + 1;
  for (size_t i = 0; i < n; i++) {
    s = s * 1664525u + 1013904223u;
    p[i] = (float)(s >> 8) / 8388608.0f - 1.0f;
  }
  return p;
}

static float *zeros(size_t n) {
  float *p = aligned_alloc(64, ((n * 4 + 63) / 64) * 64);
  memset(p, 0, n * 4);
  return p;
}

static volatile float sink;     /* the value the Receiver would get */
static const float LR = 1e-6f;

static float total(const float *y, int n) {
  float s = 0;
#pragma omp simd reduction(+ : s)
  for (int i = 0; i < n; i++) s += y[i];
  return s;
}

/* the maximum of n floats (a NaN is not propagated) */
static float row_max(const float *x, int n) {
  float m = -INFINITY;
#pragma omp simd reduction(max : m)
  for (int j = 0; j < n; j++) m = x[j] > m ? x[j] : m;
  return m;
}

/* x[M,K] @ W[N,K]^T, then the sum */
#define MM_M 1024
#define MM_K 128
#define MM_N 512
static float *mx, *mw, *my;
static void matmul(void) {
  for (int i = 0; i < MM_M; i++)
    for (int j = 0; j < MM_N; j++) {
      float s = 0;
#pragma omp simd reduction(+ : s)
      for (int k = 0; k < MM_K; k++) s += mx[i * MM_K + k] * mw[j * MM_K + k];
      my[i * MM_N + j] = s;
    }
  sink = total(my, MM_M * MM_N);
}

/* H [1024, 512] */
#define HR 1024
#define HC 512
static float *h, *hy, *hr;
static void scale_shift(void) {
#pragma omp simd
  for (int i = 0; i < HR * HC; i++) hy[i] = h[i] * 2.0f + 1.0f;
  sink = total(hy, HR * HC);
}
static void sum_last(void) {
  for (int i = 0; i < HR; i++) hr[i] = total(h + i * HC, HC);
  sink = total(hr, HR);
}
static void amax_last(void) {
  for (int i = 0; i < HR; i++) hr[i] = row_max(h + i * HC, HC);
  sink = total(hr, HR);
}
static void sum_first(void) {
  memset(hr, 0, HC * 4);
  for (int i = 0; i < HR; i++)
#pragma omp simd
    for (int j = 0; j < HC; j++) hr[j] += h[i * HC + j];
  sink = total(hr, HC);
}
static void gelu(void) {
#pragma omp simd
  for (int i = 0; i < HR * HC; i++)
    hy[i] = 0.5f * h[i] * (1.0f + erff(h[i] * 0.70710678f));
  sink = total(hy, HR * HC);
}

/* layer_norm over the last dim of x [1024, 128], weight and bias [128], eps 1e-5 */
#define LR_ 1024
#define LC 128
static float *lx, *lw, *lb, *ly, *lg, *lxh, *lrs, *ldw, *ldb;
static float ln_forward(int keep) {
  float s = 0;
  for (int i = 0; i < LR_; i++) {
    const float *x = lx + i * LC;
    float mean = total(x, LC) / LC, var = 0;
#pragma omp simd reduction(+ : var)
    for (int j = 0; j < LC; j++) var += (x[j] - mean) * (x[j] - mean);
    const float rs = 1.0f / sqrtf(var / LC + 1e-5f);
    float *xh = lxh + i * LC, *y = ly + i * LC;
#pragma omp simd
    for (int j = 0; j < LC; j++) {
      xh[j] = (x[j] - mean) * rs;
      y[j] = xh[j] * lw[j] + lb[j];
    }
    if (keep) lrs[i] = rs;
  }
  (void)s;
  return 0;
}
static void layer_norm(void) {
  ln_forward(0);
  sink = total(ly, LR_ * LC);
}
/* loss = sum(layer_norm(x) * G); its gradients; SGD on x, weight and bias */
static void layer_norm_fb(void) {
  ln_forward(1);
  float loss = 0;
  memset(ldw, 0, LC * 4);
  memset(ldb, 0, LC * 4);
  for (int i = 0; i < LR_; i++) {
    const float *g = lg + i * LC, *xh = lxh + i * LC, *y = ly + i * LC;
    float *x = lx + i * LC;
    float a = 0, b = 0, l = 0;
#pragma omp simd reduction(+ : a, b, l)
    for (int j = 0; j < LC; j++) {
      const float d = g[j] * lw[j];
      a += d;
      b += d * xh[j];
      l += y[j] * g[j];
    }
    loss += l;
    a /= LC;
    b /= LC;
#pragma omp simd
    for (int j = 0; j < LC; j++) {
      ldw[j] += g[j] * xh[j];
      ldb[j] += g[j];
      x[j] -= LR * lrs[i] * (g[j] * lw[j] - a - xh[j] * b);
    }
  }
#pragma omp simd
  for (int j = 0; j < LC; j++) {
    lw[j] -= LR * ldw[j];
    lb[j] -= LR * ldb[j];
  }
  sink = loss;
}

/* softmax over the last dim of x [4096, 64] */
#define SR 4096
#define SC 64
static float *sx, *sy, *sg;
/* y = softmax(x) over n floats; returns log(sum(exp(x))) */
static float softmax_row(const float *x, float *y, int n) {
  const float m = row_max(x, n);
  for (int j = 0; j < n; j++) y[j] = expf(x[j] - m);
  const float s = total(y, n), r = 1.0f / s;
#pragma omp simd
  for (int j = 0; j < n; j++) y[j] *= r;
  return logf(s) + m;
}
static void sm_forward(void) {
  for (int i = 0; i < SR; i++) softmax_row(sx + i * SC, sy + i * SC, SC);
}
static void softmax(void) {
  sm_forward();
  sink = total(sy, SR * SC);
}
/* loss = sum(softmax(x) * G); its gradient; SGD on x */
static void softmax_fb(void) {
  sm_forward();
  float loss = 0;
  for (int i = 0; i < SR; i++) {
    const float *y = sy + i * SC, *g = sg + i * SC;
    float *x = sx + i * SC;
    float d = 0;
#pragma omp simd reduction(+ : d)
    for (int j = 0; j < SC; j++) d += y[j] * g[j];
    loss += d;
#pragma omp simd
    for (int j = 0; j < SC; j++) x[j] -= LR * y[j] * (g[j] - d);
  }
  sink = loss;
}

/* cross_entropy(x [1024, 103], t [1024]), mean over rows */
#define CR 1024
#define CC 103
static float *cx, *cp;
static int *ct;
static float ce_forward(void) {
  float loss = 0;
  for (int i = 0; i < CR; i++)
    loss += softmax_row(cx + i * CC, cp + i * CC, CC) - cx[i * CC + ct[i]];
  return loss / CR;
}
static void cross_entropy(void) { sink = ce_forward(); }
static void cross_entropy_fb(void) {
  sink = ce_forward();
  for (int i = 0; i < CR; i++) {
    float *x = cx + i * CC;
    const float *p = cp + i * CC;
#pragma omp simd
    for (int j = 0; j < CC; j++) x[j] -= LR * p[j] / CR;
    x[ct[i]] += LR / CR;
  }
}

static const struct {
  const char *name;
  void (*fn)(void);
} CASES[] = {
    {"matmul", matmul},         {"scale_shift", scale_shift},
    {"sum_last", sum_last},     {"amax_last", amax_last},
    {"sum_first", sum_first},   {"layer_norm", layer_norm},
    {"layer_norm_fb", layer_norm_fb}, {"softmax", softmax},
    {"softmax_fb", softmax_fb}, {"cross_entropy", cross_entropy},
    {"cross_entropy_fb", cross_entropy_fb}, {"gelu", gelu},
};

static int cmp(const void *a, const void *b) {
  const double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

int main(int argc, char **argv) {
  if (argc != 3) {
    fprintf(stderr, "usage: kernels <case> <seconds>\n");
    return 2;
  }
  mx = randn(MM_M * MM_K, 1); mw = randn(MM_N * MM_K, 2); my = zeros(MM_M * MM_N);
  h = randn(HR * HC, 3); hy = zeros(HR * HC); hr = zeros(HR);
  lx = randn(LR_ * LC, 4); lw = randn(LC, 5); lb = randn(LC, 6); ly = zeros(LR_ * LC);
  lg = randn(LR_ * LC, 7); lxh = zeros(LR_ * LC); lrs = zeros(LR_);
  ldw = zeros(LC); ldb = zeros(LC);
  sx = randn(SR * SC, 8); sy = zeros(SR * SC); sg = randn(SR * SC, 9);
  cx = randn(CR * CC, 10); cp = zeros(CR * CC);
  ct = malloc(CR * sizeof(int));
  for (int i = 0; i < CR; i++) ct[i] = (i * 37) % CC;
  void (*fn)(void) = NULL;
  for (size_t i = 0; i < sizeof CASES / sizeof CASES[0]; i++)
    if (!strcmp(argv[1], CASES[i].name)) fn = CASES[i].fn;
  if (!fn) {
    fprintf(stderr, "kernels: no case %s\n", argv[1]);
    return 2;
  }
  const double budget = atof(argv[2]);
  double t = now();
  int n = 0;
  do { fn(); n++; } while (now() - t < budget / 10);     /* warm up, size a batch */
  enum { BATCHES = 9 };
  double per[BATCHES];
  for (int b = 0; b < BATCHES; b++) {
    t = now();
    for (int i = 0; i < n; i++) fn();
    per[b] = (now() - t) / n;
  }
  qsort(per, BATCHES, sizeof per[0], cmp);
  printf("%.9g\n", per[BATCHES / 2]);
  return 0;
}
