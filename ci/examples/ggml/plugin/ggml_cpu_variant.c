/* Picks ggml's CPU build for this machine at run time, the way ggml_backend_load_best() does: each
 * libggml-cpu-*.so exports ggml_backend_score(), 0 when the CPU lacks its ISA, higher for wider ones. */
#define _GNU_SOURCE
#include "ggml_cpu_variant.h"

#include <dirent.h>
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>

static ggml_cpu_variant loaded;
static char load_error[256];
static int load_ok;
static const char* load_directory;
static pthread_once_t once = PTHREAD_ONCE_INIT;

static int is_variant_file(const char* name) {
  const size_t n = strlen(name);
  return strncmp(name, "libggml-cpu-", 12) == 0 && n > 15 && strcmp(name + n - 3, ".so") == 0;
}

static void load_best(void) {
  DIR* dir = opendir(load_directory);
  if (!dir) {
    snprintf(load_error, sizeof load_error, "cannot open %s", load_directory);
    return;
  }
  void* best = NULL;
  int best_score = 0;
  for (struct dirent* entry; (entry = readdir(dir));) {
    if (!is_variant_file(entry->d_name)) continue;
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", load_directory, entry->d_name);
    void* handle = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (!handle) continue;
    int (*score)(void) = (int (*)(void))dlsym(handle, "ggml_backend_score");
    const int s = score ? score() : 0;
    if (s > best_score) {
      if (best) dlclose(best);
      best = handle, best_score = s;
      snprintf(loaded.name, sizeof loaded.name, "%s", entry->d_name);
    } else {
      dlclose(handle);
    }
  }
  closedir(dir);
  if (!best) {
    snprintf(load_error, sizeof load_error, "no libggml-cpu-*.so in %s runs on this CPU", load_directory);
    return;
  }
  int (*has_avx512)(void) = (int (*)(void))dlsym(best, "ggml_cpu_has_avx512");
  int (*has_avx)(void) = (int (*)(void))dlsym(best, "ggml_cpu_has_avx");
  loaded.graph_plan =
      (struct ggml_cplan(*)(const struct ggml_cgraph*, int, struct ggml_threadpool*))dlsym(best, "ggml_graph_plan");
  loaded.graph_compute =
      (enum ggml_status(*)(struct ggml_cgraph*, struct ggml_cplan*))dlsym(best, "ggml_graph_compute");
  if (!has_avx512 || !has_avx || !loaded.graph_plan || !loaded.graph_compute) {
    snprintf(load_error, sizeof load_error, "%s lacks ggml's CPU functions", loaded.name);
    return;
  }
  /* The SIMD width each build was compiled for (ggml-cpu/simd-mappings.h): the tiled flash
   * attention path needs Dv to be a multiple of it. */
  loaded.f32_per_simd = has_avx512() ? 16 : has_avx() ? 8 : 4;
  load_ok = 1;
}

const ggml_cpu_variant* ggml_cpu_variant_load(const char* directory, char* error, size_t error_size) {
  load_directory = directory;
  pthread_once(&once, load_best);
  if (!load_ok) snprintf(error, error_size, "%s", load_error);
  return load_ok ? &loaded : NULL;
}
