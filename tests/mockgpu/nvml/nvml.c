/* libnvidia-ml.so.1 of the mock GPU host: the NVML entry points pynvml uses,
 * answered from gpus.json and from the holder registry checked against live processes.
 * Layouts and return codes follow nvml.h as read by pynvml (nvidia-ml-py 13.x). */
#include "mockgpu.h"

#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define API __attribute__((visibility("default")))

typedef int nvmlReturn_t;
enum {
    NVML_SUCCESS = 0,
    NVML_ERROR_UNINITIALIZED = 1,
    NVML_ERROR_INVALID_ARGUMENT = 2,
    NVML_ERROR_NOT_SUPPORTED = 3,
    NVML_ERROR_NO_PERMISSION = 4,
    NVML_ERROR_ALREADY_INITIALIZED = 5,
    NVML_ERROR_NOT_FOUND = 6,
    NVML_ERROR_INSUFFICIENT_SIZE = 7,
    NVML_ERROR_DRIVER_NOT_LOADED = 9,
    NVML_ERROR_FUNCTION_NOT_FOUND = 13,
    NVML_ERROR_GPU_IS_LOST = 15,
    NVML_ERROR_MEMORY = 20,
    NVML_ERROR_ARGUMENT_VERSION_MISMATCH = 25,
    NVML_ERROR_UNKNOWN = 999,
};

#define MIB (1024ULL * 1024ULL)
#define NVML_VALUE_NOT_AVAILABLE_UINT 0xFFFFFFFFu
#define MAX_PROCS 1024

typedef struct mock_gpu *nvmlDevice_t;

typedef struct {
    unsigned long long total, free, used;
} nvmlMemory_t;

typedef struct {
    unsigned int version;
    unsigned long long total, reserved, free, used;
} nvmlMemory_v2_t;
#define nvmlMemory_v2 ((unsigned)(sizeof(nvmlMemory_v2_t) | (2u << 24)))

typedef struct {
    unsigned int pid;
    unsigned long long usedGpuMemory;
} nvmlProcessInfo_v1_t;

typedef struct {
    unsigned int pid;
    unsigned long long usedGpuMemory;
    unsigned int gpuInstanceId;
    unsigned int computeInstanceId;
} nvmlProcessInfo_t; /* v2 and v3 share this layout */

static pthread_mutex_t g_lock = PTHREAD_MUTEX_INITIALIZER;
static int g_refs;
static struct mock_config g_cfg;
static char g_registry[PATH_MAX];
static char g_devdir[PATH_MAX];
static int g_fds[MOCKGPU_MAX_GPUS + 2];
static int g_nfds;

static const char *env_or(const char *name, const char *dflt)
{
    const char *v = getenv(name);
    return (v && *v) ? v : dflt;
}

static void devnode_path(unsigned index, char *out, size_t cap)
{
    snprintf(out, cap, "%s/nvidia%u", g_devdir, index);
}

/* Like the real library, an initialised client keeps the device nodes open
 * (measured: nvidiactl, nvidia<k>, nvidia-uvm; the mock opens those present). */
static void open_nodes(void)
{
    char path[PATH_MAX + 32];
    int i, fd;

    g_nfds = 0;
    for (i = -2; i < g_cfg.count; i++) {
        if (i == -2)
            snprintf(path, sizeof path, "%s/nvidiactl", g_devdir);
        else if (i == -1)
            snprintf(path, sizeof path, "%s/nvidia-uvm", g_devdir);
        else
            devnode_path(g_cfg.gpus[i].index, path, sizeof path);
        fd = open(path, O_RDWR | O_CLOEXEC);
        if (fd < 0)
            fd = open(path, O_RDONLY | O_CLOEXEC);
        if (fd >= 0)
            g_fds[g_nfds++] = fd;
    }
}

static void close_nodes(void)
{
    while (g_nfds > 0)
        close(g_fds[--g_nfds]);
}

static nvmlReturn_t do_init(void)
{
    char err[256];
    int rc;

    pthread_mutex_lock(&g_lock);
    if (g_refs > 0) {
        g_refs++;
        pthread_mutex_unlock(&g_lock);
        return NVML_SUCCESS;
    }
    snprintf(g_registry, sizeof g_registry, "%s", env_or("MOCKGPU_REGISTRY", "/run/mockgpu/holders"));
    snprintf(g_devdir, sizeof g_devdir, "%s", env_or("MOCKGPU_DEV_DIR", "/dev"));
    rc = mock_config_load(env_or("MOCKGPU_CONFIG", "/etc/mockgpu/gpus.json"), &g_cfg, err, sizeof err);
    if (rc != 0) {
        pthread_mutex_unlock(&g_lock);
        /* a missing config is a host without a driver; a broken one is a bug worth a line */
        if (rc == -2)
            return NVML_ERROR_DRIVER_NOT_LOADED;
        fprintf(stderr, "mockgpu libnvidia-ml: %s\n", err);
        return NVML_ERROR_UNKNOWN;
    }
    open_nodes();
    g_refs = 1;
    pthread_mutex_unlock(&g_lock);
    return NVML_SUCCESS;
}

API nvmlReturn_t nvmlInit(void) { return do_init(); }
API nvmlReturn_t nvmlInit_v2(void) { return do_init(); }
API nvmlReturn_t nvmlInitWithFlags(unsigned int flags) { (void)flags; return do_init(); }

API nvmlReturn_t nvmlShutdown(void)
{
    pthread_mutex_lock(&g_lock);
    if (g_refs == 0) {
        pthread_mutex_unlock(&g_lock);
        return NVML_ERROR_UNINITIALIZED;
    }
    if (--g_refs == 0)
        close_nodes();
    pthread_mutex_unlock(&g_lock);
    return NVML_SUCCESS;
}

API const char *nvmlErrorString(nvmlReturn_t result)
{
    switch (result) {
    case NVML_SUCCESS: return "Success";
    case NVML_ERROR_UNINITIALIZED: return "Uninitialized";
    case NVML_ERROR_INVALID_ARGUMENT: return "Invalid Argument";
    case NVML_ERROR_NOT_SUPPORTED: return "Not Supported";
    case NVML_ERROR_NO_PERMISSION: return "Insufficient Permissions";
    case NVML_ERROR_ALREADY_INITIALIZED: return "Already Initialized";
    case NVML_ERROR_NOT_FOUND: return "Not Found";
    case NVML_ERROR_INSUFFICIENT_SIZE: return "Insufficient Size";
    case NVML_ERROR_DRIVER_NOT_LOADED: return "Driver Not Loaded";
    case NVML_ERROR_FUNCTION_NOT_FOUND: return "Function Not Found";
    case NVML_ERROR_GPU_IS_LOST: return "GPU is lost";
    case NVML_ERROR_MEMORY: return "Insufficient Memory";
    case NVML_ERROR_ARGUMENT_VERSION_MISMATCH: return "Argument version mismatch";
    default: return "Unknown Error";
    }
}

/* Every call below runs under the lock with the library initialised. */
#define ENTER()                                         \
    do {                                                \
        pthread_mutex_lock(&g_lock);                    \
        if (g_refs == 0) {                              \
            pthread_mutex_unlock(&g_lock);              \
            return NVML_ERROR_UNINITIALIZED;            \
        }                                               \
    } while (0)
#define LEAVE(rc)                                       \
    do {                                                \
        pthread_mutex_unlock(&g_lock);                  \
        return (rc);                                    \
    } while (0)

/* A handle is valid only if it points at one of our GPU slots. */
static struct mock_gpu *gpu_of(nvmlDevice_t h)
{
    uintptr_t base = (uintptr_t)g_cfg.gpus, p = (uintptr_t)h;

    if (p < base || p >= base + (uintptr_t)g_cfg.count * sizeof g_cfg.gpus[0])
        return NULL;
    if ((p - base) % sizeof g_cfg.gpus[0])
        return NULL;
    return h;
}

static nvmlReturn_t copy_str(char *out, unsigned int len, const char *s)
{
    size_t need = strlen(s) + 1;

    if (!out)
        return NVML_ERROR_INVALID_ARGUMENT;
    if (len < need)
        return NVML_ERROR_INSUFFICIENT_SIZE;
    memcpy(out, s, need);
    return NVML_SUCCESS;
}

API nvmlReturn_t nvmlSystemGetDriverVersion(char *version, unsigned int length)
{
    nvmlReturn_t rc;
    ENTER();
    rc = copy_str(version, length, g_cfg.driver_version);
    LEAVE(rc);
}

API nvmlReturn_t nvmlSystemGetNVMLVersion(char *version, unsigned int length)
{
    char buf[MOCKGPU_VERSION_LEN + 32];
    nvmlReturn_t rc;
    ENTER();
    /* NVML's version is "<CUDA major>.<driver version>" */
    snprintf(buf, sizeof buf, "%llu.%s", g_cfg.cuda_version / 1000, g_cfg.driver_version);
    rc = copy_str(version, length, buf);
    LEAVE(rc);
}

static nvmlReturn_t cuda_version(int *v)
{
    ENTER();
    if (!v)
        LEAVE(NVML_ERROR_INVALID_ARGUMENT);
    *v = (int)g_cfg.cuda_version;
    LEAVE(NVML_SUCCESS);
}
API nvmlReturn_t nvmlSystemGetCudaDriverVersion(int *v) { return cuda_version(v); }
API nvmlReturn_t nvmlSystemGetCudaDriverVersion_v2(int *v) { return cuda_version(v); }

API nvmlReturn_t nvmlSystemGetProcessName(unsigned int pid, char *name, unsigned int length)
{
    char path[64], buf[PATH_MAX];
    ssize_t n = -1;
    int fd;

    ENTER();
    if (!name || length == 0)
        LEAVE(NVML_ERROR_INVALID_ARGUMENT);
    /* argv[0] like the real library, comm for processes without a command line */
    snprintf(path, sizeof path, "/proc/%u/cmdline", pid);
    fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd >= 0) {
        n = read(fd, buf, sizeof buf - 1);
        close(fd);
    }
    if (n <= 0 || buf[0] == '\0') {
        snprintf(path, sizeof path, "/proc/%u/comm", pid);
        fd = open(path, O_RDONLY | O_CLOEXEC);
        if (fd < 0)
            LEAVE(NVML_ERROR_NOT_FOUND);
        n = read(fd, buf, sizeof buf - 1);
        close(fd);
        if (n <= 0)
            LEAVE(NVML_ERROR_NOT_FOUND);
        if (buf[n - 1] == '\n')
            n--;
    }
    buf[n] = '\0';
    /* the real call truncates to the caller's buffer */
    snprintf(name, length, "%s", buf);
    LEAVE(NVML_SUCCESS);
}

static nvmlReturn_t device_count(unsigned int *count)
{
    ENTER();
    if (!count)
        LEAVE(NVML_ERROR_INVALID_ARGUMENT);
    *count = (unsigned)g_cfg.count;
    LEAVE(NVML_SUCCESS);
}
API nvmlReturn_t nvmlDeviceGetCount(unsigned int *count) { return device_count(count); }
API nvmlReturn_t nvmlDeviceGetCount_v2(unsigned int *count) { return device_count(count); }

static nvmlReturn_t handle_by_index(unsigned int index, nvmlDevice_t *device)
{
    ENTER();
    if (!device || index >= (unsigned)g_cfg.count)
        LEAVE(NVML_ERROR_INVALID_ARGUMENT);
    *device = &g_cfg.gpus[index];
    LEAVE(NVML_SUCCESS);
}
API nvmlReturn_t nvmlDeviceGetHandleByIndex(unsigned int i, nvmlDevice_t *d) { return handle_by_index(i, d); }
API nvmlReturn_t nvmlDeviceGetHandleByIndex_v2(unsigned int i, nvmlDevice_t *d) { return handle_by_index(i, d); }

API nvmlReturn_t nvmlDeviceGetHandleByUUID(const char *uuid, nvmlDevice_t *device)
{
    int i;
    ENTER();
    if (!uuid || !device)
        LEAVE(NVML_ERROR_INVALID_ARGUMENT);
    for (i = 0; i < g_cfg.count; i++) {
        if (strcmp(g_cfg.gpus[i].uuid, uuid) == 0) {
            *device = &g_cfg.gpus[i];
            LEAVE(NVML_SUCCESS);
        }
    }
    LEAVE(NVML_ERROR_NOT_FOUND);
}

/* Resolve a handle under the lock, or leave with INVALID_ARGUMENT. */
#define DEVICE(g, handle)                               \
    do {                                                \
        (g) = gpu_of(handle);                           \
        if (!(g))                                       \
            LEAVE(NVML_ERROR_INVALID_ARGUMENT);         \
    } while (0)

API nvmlReturn_t nvmlDeviceGetName(nvmlDevice_t device, char *name, unsigned int length)
{
    struct mock_gpu *g;
    nvmlReturn_t rc;
    ENTER();
    DEVICE(g, device);
    rc = copy_str(name, length, g->name);
    LEAVE(rc);
}

API nvmlReturn_t nvmlDeviceGetUUID(nvmlDevice_t device, char *uuid, unsigned int length)
{
    struct mock_gpu *g;
    nvmlReturn_t rc;
    ENTER();
    DEVICE(g, device);
    rc = copy_str(uuid, length, g->uuid);
    LEAVE(rc);
}

static nvmlReturn_t device_uint(nvmlDevice_t device, unsigned int *out)
{
    struct mock_gpu *g;
    ENTER();
    DEVICE(g, device);
    if (!out)
        LEAVE(NVML_ERROR_INVALID_ARGUMENT);
    *out = g->index;
    LEAVE(NVML_SUCCESS);
}
API nvmlReturn_t nvmlDeviceGetIndex(nvmlDevice_t d, unsigned int *index) { return device_uint(d, index); }
/* the mock's device node nvidia<k> has minor number k */
API nvmlReturn_t nvmlDeviceGetMinorNumber(nvmlDevice_t d, unsigned int *minor) { return device_uint(d, minor); }

/* Live holders of one GPU; called with the lock held. */
static int holders_of(const struct mock_gpu *g, struct mock_holder *out, int cap,
                      unsigned long long *mib_sum)
{
    char node[PATH_MAX + 32];

    devnode_path(g->index, node, sizeof node);
    return mock_holders(g_registry, node, g->index, out, cap, mib_sum);
}

static unsigned long long sub0(unsigned long long a, unsigned long long b)
{
    return a > b ? a - b : 0;
}

/* v1 counts the driver-reserved memory as used, as on a real H200 */
API nvmlReturn_t nvmlDeviceGetMemoryInfo(nvmlDevice_t device, nvmlMemory_t *memory)
{
    struct mock_holder none[1];
    unsigned long long held;
    struct mock_gpu *g;
    ENTER();
    DEVICE(g, device);
    if (!memory)
        LEAVE(NVML_ERROR_INVALID_ARGUMENT);
    holders_of(g, none, 0, &held);
    memory->total = g->total_mib * MIB;
    memory->used = (held + g->reserved_mib) * MIB;
    memory->free = sub0(memory->total, memory->used);
    LEAVE(NVML_SUCCESS);
}

/* v2 reports reserved separately: used is only what processes hold */
API nvmlReturn_t nvmlDeviceGetMemoryInfo_v2(nvmlDevice_t device, nvmlMemory_v2_t *memory)
{
    struct mock_holder none[1];
    unsigned long long held;
    struct mock_gpu *g;
    ENTER();
    DEVICE(g, device);
    if (!memory)
        LEAVE(NVML_ERROR_INVALID_ARGUMENT);
    /* measured on driver 580: any other version gives FUNCTION_NOT_FOUND, not VERSION_MISMATCH */
    if (memory->version != nvmlMemory_v2)
        LEAVE(NVML_ERROR_FUNCTION_NOT_FOUND);
    holders_of(g, none, 0, &held);
    memory->total = g->total_mib * MIB;
    memory->reserved = g->reserved_mib * MIB;
    memory->used = held * MIB;
    memory->free = sub0(memory->total, memory->reserved + memory->used);
    LEAVE(NVML_SUCCESS);
}

/* The size protocol of the process lists: count too small -> INSUFFICIENT_SIZE with the need. */
static nvmlReturn_t list_procs(nvmlDevice_t device, unsigned int *count, void *infos, int v1)
{
    static struct mock_holder found[MAX_PROCS];
    unsigned long long held;
    struct mock_gpu *g;
    int n, i;

    ENTER();
    DEVICE(g, device);
    if (!count)
        LEAVE(NVML_ERROR_INVALID_ARGUMENT);
    n = holders_of(g, found, MAX_PROCS, &held);
    if (n > MAX_PROCS)
        n = MAX_PROCS;
    if (*count < (unsigned)n) {
        *count = (unsigned)n;
        LEAVE(NVML_ERROR_INSUFFICIENT_SIZE);
    }
    if (n > 0 && !infos)
        LEAVE(NVML_ERROR_INVALID_ARGUMENT);
    for (i = 0; i < n; i++) {
        if (v1) {
            nvmlProcessInfo_v1_t *p = (nvmlProcessInfo_v1_t *)infos + i;
            p->pid = found[i].pid;
            p->usedGpuMemory = found[i].mib * MIB;
        } else {
            nvmlProcessInfo_t *p = (nvmlProcessInfo_t *)infos + i;
            p->pid = found[i].pid;
            p->usedGpuMemory = found[i].mib * MIB;
            /* MIG is off on the mock, as on the measured H200 */
            p->gpuInstanceId = NVML_VALUE_NOT_AVAILABLE_UINT;
            p->computeInstanceId = NVML_VALUE_NOT_AVAILABLE_UINT;
        }
    }
    *count = (unsigned)n;
    LEAVE(NVML_SUCCESS);
}

API nvmlReturn_t nvmlDeviceGetComputeRunningProcesses(nvmlDevice_t d, unsigned int *c, nvmlProcessInfo_v1_t *p)
{
    return list_procs(d, c, p, 1);
}
API nvmlReturn_t nvmlDeviceGetComputeRunningProcesses_v2(nvmlDevice_t d, unsigned int *c, nvmlProcessInfo_t *p)
{
    return list_procs(d, c, p, 0);
}
API nvmlReturn_t nvmlDeviceGetComputeRunningProcesses_v3(nvmlDevice_t d, unsigned int *c, nvmlProcessInfo_t *p)
{
    return list_procs(d, c, p, 0);
}

/* Mock holders are compute contexts only: graphics and MPS lists are empty. */
static nvmlReturn_t no_procs(nvmlDevice_t device, unsigned int *count)
{
    struct mock_gpu *g;
    ENTER();
    DEVICE(g, device);
    (void)g;
    if (!count)
        LEAVE(NVML_ERROR_INVALID_ARGUMENT);
    *count = 0;
    LEAVE(NVML_SUCCESS);
}
API nvmlReturn_t nvmlDeviceGetGraphicsRunningProcesses(nvmlDevice_t d, unsigned int *c, void *p)
{
    (void)p;
    return no_procs(d, c);
}
API nvmlReturn_t nvmlDeviceGetGraphicsRunningProcesses_v2(nvmlDevice_t d, unsigned int *c, void *p)
{
    (void)p;
    return no_procs(d, c);
}
API nvmlReturn_t nvmlDeviceGetGraphicsRunningProcesses_v3(nvmlDevice_t d, unsigned int *c, void *p)
{
    (void)p;
    return no_procs(d, c);
}
API nvmlReturn_t nvmlDeviceGetMPSComputeRunningProcesses_v3(nvmlDevice_t d, unsigned int *c, void *p)
{
    (void)p;
    return no_procs(d, c);
}
