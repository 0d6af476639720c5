// Memory read bandwidth of this machine: the roofline for decode (every weight is read once
// per token). Two threads (the cores lavapipe uses here) sum a 160 MiB buffer with AVX2.
// Build and run: gcc -O2 -mavx2 -pthread bench/micro/memory_bandwidth.c -o /tmp/membw && /tmp/membw
#include <immintrin.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#define BYTES (160u << 20)
#define THREADS 2
static float* data;
static volatile float sink[THREADS];

static void* sum_part(void* arg) {
  long id = (long)arg;
  size_t n = BYTES / 4 / THREADS;
  const float* p = data + id * n;
  __m256 s0 = _mm256_setzero_ps(), s1 = s0, s2 = s0, s3 = s0;
  for (size_t i = 0; i < n; i += 32) {
    s0 = _mm256_add_ps(s0, _mm256_load_ps(p + i));
    s1 = _mm256_add_ps(s1, _mm256_load_ps(p + i + 8));
    s2 = _mm256_add_ps(s2, _mm256_load_ps(p + i + 16));
    s3 = _mm256_add_ps(s3, _mm256_load_ps(p + i + 24));
  }
  float t[8];
  _mm256_storeu_ps(t, _mm256_add_ps(_mm256_add_ps(s0, s1), _mm256_add_ps(s2, s3)));
  sink[id] = t[0] + t[7];
  return NULL;
}

int main(void) {
  data = aligned_alloc(64, BYTES);
  for (size_t i = 0; i < BYTES / 4; ++i) data[i] = 1.0f;
  for (int run = 0; run < 5; ++run) {
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    pthread_t th[THREADS];
    for (long i = 0; i < THREADS; ++i) pthread_create(&th[i], NULL, sum_part, (void*)i);
    for (int i = 0; i < THREADS; ++i) pthread_join(th[i], NULL);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    double s = (double)(t1.tv_sec - t0.tv_sec) + 1e-9 * (double)(t1.tv_nsec - t0.tv_nsec);
    printf("%.1f GB/s\n", BYTES / s * 1e-9);
  }
  free(data);
  return 0;
}
