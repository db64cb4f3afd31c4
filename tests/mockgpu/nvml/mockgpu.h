/* Internal interfaces of the mock NVML: GPU config and holder registry. */
#ifndef MOCKGPU_H
#define MOCKGPU_H

#include <stddef.h>

#define MOCKGPU_MAX_GPUS 64
#define MOCKGPU_NAME_LEN 96
#define MOCKGPU_UUID_LEN 96
#define MOCKGPU_VERSION_LEN 80

struct mock_gpu {
    unsigned index;
    char name[MOCKGPU_NAME_LEN];
    char uuid[MOCKGPU_UUID_LEN];
    unsigned long long total_mib;
    unsigned long long reserved_mib;
};

struct mock_config {
    struct mock_gpu gpus[MOCKGPU_MAX_GPUS];
    int count;
    char driver_version[MOCKGPU_VERSION_LEN];
    unsigned long long cuda_version;
};

/* Parse a gpus.json text. Returns 0, or -1 with a reason in err. GPUs come out sorted by index. */
int mock_config_parse(const char *text, size_t len, struct mock_config *cfg,
                      char *err, size_t errlen);
/* Read and parse the file; -2 when it cannot be read. */
int mock_config_load(const char *path, struct mock_config *cfg, char *err, size_t errlen);

struct mock_holder {
    unsigned pid;
    unsigned long long mib;
};

/* Parse one registry entry text into its fields; 0 when well-formed. */
int mock_entry_parse(const char *text, size_t len, unsigned long long *pid, unsigned long long *gpu,
                     unsigned long long *mib, unsigned long long *starttime);

/* Live holders of GPU `gpu`: entries in `registry` whose process is alive, not a zombie,
 * has the same starttime and holds `devnode` open. Fills up to cap, sorted by pid,
 * returns how many there are in total (may exceed cap); *mib_sum covers all of them. */
int mock_holders(const char *registry, const char *devnode, unsigned gpu,
                 struct mock_holder *out, int cap, unsigned long long *mib_sum);

/* State char and starttime (field 22) of /proc/<pid>/stat; 0 on success. */
int mock_proc_stat(unsigned pid, char *state, unsigned long long *starttime);
/* 1 when /proc/<pid>/fd has a descriptor whose target is `path` (already canonical). */
int mock_proc_has_open(unsigned pid, const char *path);

#endif
