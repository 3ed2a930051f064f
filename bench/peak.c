/* fp32 FMA throughput of this CPU: `peak <threads> <seconds>` prints GFLOP/s summed over
   <threads> POSIX threads, each running independent fused multiply-add chains on vectors
   as wide as the CPU's registers (GCC vector extensions, -O3 -march=native: 16 floats
   with AVX-512, else 8). 12 chains cover the FMA latency x throughput product of current
   x86 cores and fit in 16 vector registers. Each lane runs acc = acc * a + b with
   0 < a < 1 and b > 0, so it settles at b / (1 - a), a normal float: a lane with b = 0
   decays through the subnormals, where every FMA takes a microcode assist (it did in
   lane 0, from ~0.2 s on: one Emerald Rapids core read 68 GFLOP/s instead of 162).
   A second line gives the smallest |acc| at the end, for the tests to check that. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#ifdef __AVX512F__
#define W 16
#else
#define W 8
#endif
typedef float v16 __attribute__((vector_size(4 * W)));
#define CHAINS 12
#define INNER 4096

static double seconds;
static double now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec + 1e-9 * t.tv_nsec;
}

static void *work(void *out) {
  v16 acc[CHAINS], a, b;
  for (int j = 0; j < W; j++) { a[j] = 0.999999f; b[j] = 1e-7f * (j + 1); }
  for (int c = 0; c < CHAINS; c++) acc[c] = b + (float)c;
  long iters = 0;
  double t0 = now(), t;
  do {
    for (int i = 0; i < INNER; i++)
      for (int c = 0; c < CHAINS; c++) acc[c] = acc[c] * a + b;
    iters += INNER;
    t = now();
  } while (t - t0 < seconds);
  float least = acc[0][0] < 0 ? -acc[0][0] : acc[0][0];
  for (int c = 0; c < CHAINS; c++)
    for (int j = 0; j < W; j++) {
      float m = acc[c][j] < 0 ? -acc[c][j] : acc[c][j];
      if (m < least) least = m;
    }
  ((double *)out)[0] = 2.0 * W * CHAINS * iters / (t - t0) / 1e9;
  ((double *)out)[1] = least;
  return NULL;
}

int main(int argc, char **argv) {
  int n = argc > 1 ? atoi(argv[1]) : 1;
  seconds = argc > 2 ? atof(argv[2]) : 0.3;
  pthread_t th[256];
  double gf[256][2];
  if (n < 1 || n > 256) return 2;
  for (int i = 0; i < n; i++) pthread_create(&th[i], NULL, work, gf[i]);
  double sum = 0, least = 1e300;
  for (int i = 0; i < n; i++) {
    pthread_join(th[i], NULL);
    sum += gf[i][0];
    if (gf[i][1] < least) least = gf[i][1];
  }
  printf("%.3f\n%.9g\n", sum, least);
  return 0;
}
