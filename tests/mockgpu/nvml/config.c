/* gpus.json -> struct mock_config. */
#include "mockgpu.h"
#include "mjson.h"

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define CONFIG_MAX_BYTES (1 << 20)

enum { HAVE_INDEX = 1, HAVE_UUID = 2, HAVE_TOTAL = 4 };

struct gpu_ctx {
    struct mock_gpu *gpu;
    int have;
};

/* Names, UUIDs and versions of real GPUs are printable ASCII; callers decode them as such. */
static int printable(const char *s)
{
    for (; *s; s++)
        if ((unsigned char)*s < 0x20 || (unsigned char)*s > 0x7e)
            return 0;
    return 1;
}

static int gpu_member(mj_cur *c, const char *key, void *vctx)
{
    struct gpu_ctx *g = vctx;
    unsigned long long v;

    if (strcmp(key, "index") == 0) {
        if (mj_uint(c, &v) || v >= MOCKGPU_MAX_GPUS)
            return -1;
        g->gpu->index = (unsigned)v;
        g->have |= HAVE_INDEX;
        return 0;
    }
    if (strcmp(key, "name") == 0)
        return mj_string(c, g->gpu->name, sizeof g->gpu->name) || !printable(g->gpu->name) ? -1 : 0;
    if (strcmp(key, "uuid") == 0) {
        g->have |= HAVE_UUID;
        return mj_string(c, g->gpu->uuid, sizeof g->gpu->uuid) || !printable(g->gpu->uuid) ? -1 : 0;
    }
    if (strcmp(key, "memory_total_mib") == 0) {
        g->have |= HAVE_TOTAL;
        return mj_uint(c, &g->gpu->total_mib);
    }
    if (strcmp(key, "reserved_mib") == 0)
        return mj_uint(c, &g->gpu->reserved_mib);
    return mj_skip(c);
}

static int gpu_elem(mj_cur *c, void *vctx)
{
    struct mock_config *cfg = vctx;
    struct gpu_ctx g;

    if (cfg->count >= MOCKGPU_MAX_GPUS)
        return -1;
    g.gpu = &cfg->gpus[cfg->count];
    memset(g.gpu, 0, sizeof *g.gpu);
    strcpy(g.gpu->name, "NVIDIA H200");
    g.have = 0;
    if (mj_object(c, gpu_member, &g))
        return -1;
    if (g.have != (HAVE_INDEX | HAVE_UUID | HAVE_TOTAL) || g.gpu->uuid[0] == '\0' ||
        g.gpu->reserved_mib > g.gpu->total_mib)
        return -1;
    cfg->count++;
    return 0;
}

static int top_member(mj_cur *c, const char *key, void *vctx)
{
    struct mock_config *cfg = vctx;

    if (strcmp(key, "gpus") == 0)
        return mj_array(c, gpu_elem, cfg);
    if (strcmp(key, "driver_version") == 0)
        return mj_string(c, cfg->driver_version, sizeof cfg->driver_version) ||
               !printable(cfg->driver_version) ? -1 : 0;
    if (strcmp(key, "cuda_driver_version") == 0)
        return mj_uint(c, &cfg->cuda_version);
    return mj_skip(c);
}

static int by_index(const void *a, const void *b)
{
    const struct mock_gpu *x = a, *y = b;
    return (x->index > y->index) - (x->index < y->index);
}

int mock_config_parse(const char *text, size_t len, struct mock_config *cfg,
                      char *err, size_t errlen)
{
    mj_cur c;
    int i;

    memset(cfg, 0, sizeof *cfg);
    /* defaults: what the measured H200 host reported */
    strcpy(cfg->driver_version, "580.159.04");
    cfg->cuda_version = 13000;
    mj_init(&c, text, len);
    if (mj_object(&c, top_member, cfg) || mj_end(&c)) {
        snprintf(err, errlen, "malformed JSON or GPU entry near byte %zu", c.i);
        return -1;
    }
    qsort(cfg->gpus, (size_t)cfg->count, sizeof cfg->gpus[0], by_index);
    /* NVML indices are 0..N-1: handle i must be the GPU with index i */
    for (i = 0; i < cfg->count; i++) {
        if (cfg->gpus[i].index != (unsigned)i) {
            snprintf(err, errlen, "GPU indices must be 0..%d without gaps or duplicates", cfg->count - 1);
            return -1;
        }
    }
    for (i = 0; i < cfg->count; i++) {
        int j;
        for (j = 0; j < i; j++) {
            if (strcmp(cfg->gpus[i].uuid, cfg->gpus[j].uuid) == 0) {
                snprintf(err, errlen, "duplicate GPU uuid %s", cfg->gpus[i].uuid);
                return -1;
            }
        }
    }
    return 0;
}

int mock_config_load(const char *path, struct mock_config *cfg, char *err, size_t errlen)
{
    char *buf;
    ssize_t got;
    size_t len = 0;
    int fd, rc;

    fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        snprintf(err, errlen, "cannot open %s", path);
        return -2;
    }
    buf = malloc(CONFIG_MAX_BYTES);
    if (!buf) {
        close(fd);
        snprintf(err, errlen, "out of memory");
        return -1;
    }
    while (len < CONFIG_MAX_BYTES &&
           (got = read(fd, buf + len, CONFIG_MAX_BYTES - len)) > 0)
        len += (size_t)got;
    close(fd);
    if (len >= CONFIG_MAX_BYTES) {
        free(buf);
        snprintf(err, errlen, "%s is too large", path);
        return -1;
    }
    rc = mock_config_parse(buf, len, cfg, err, errlen);
    free(buf);
    return rc;
}
