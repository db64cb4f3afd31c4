/* Who holds mock GPU memory: registry entries checked against live processes.
 * Evaluated on every query, so memory frees the moment a holder dies. */
#include "mockgpu.h"
#include "mjson.h"

#include <dirent.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define ENTRY_MAX_BYTES 4096

enum { E_PID = 1, E_GPU = 2, E_MIB = 4, E_START = 8 };

struct entry_ctx {
    unsigned long long pid, gpu, mib, starttime;
    int have;
};

static int entry_member(mj_cur *c, const char *key, void *vctx)
{
    struct entry_ctx *e = vctx;

    if (strcmp(key, "pid") == 0) {
        e->have |= E_PID;
        return mj_uint(c, &e->pid);
    }
    if (strcmp(key, "gpu") == 0) {
        e->have |= E_GPU;
        return mj_uint(c, &e->gpu);
    }
    if (strcmp(key, "mib") == 0) {
        e->have |= E_MIB;
        return mj_uint(c, &e->mib);
    }
    if (strcmp(key, "starttime") == 0) {
        e->have |= E_START;
        return mj_uint(c, &e->starttime);
    }
    return mj_skip(c);
}

int mock_entry_parse(const char *text, size_t len, unsigned long long *pid, unsigned long long *gpu,
                     unsigned long long *mib, unsigned long long *starttime)
{
    struct entry_ctx e;
    mj_cur c;

    memset(&e, 0, sizeof e);
    mj_init(&c, text, len);
    if (mj_object(&c, entry_member, &e) || mj_end(&c) ||
        e.have != (E_PID | E_GPU | E_MIB | E_START))
        return -1;
    *pid = e.pid;
    *gpu = e.gpu;
    *mib = e.mib;
    *starttime = e.starttime;
    return 0;
}

/* Whole small file into buf (NUL-terminated); -1 when unreadable or too large. */
static ssize_t read_small(int dirfd, const char *name, char *buf, size_t cap)
{
    size_t len = 0;
    ssize_t got;
    int fd = openat(dirfd, name, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);

    if (fd < 0)
        return -1;
    while (len < cap - 1 && (got = read(fd, buf + len, cap - 1 - len)) > 0)
        len += (size_t)got;
    if (len == cap - 1) {
        char extra;
        if (read(fd, &extra, 1) > 0) {
            close(fd);
            return -1;
        }
    }
    close(fd);
    buf[len] = '\0';
    return (ssize_t)len;
}

int mock_proc_stat(unsigned pid, char *state, unsigned long long *starttime)
{
    char path[64], buf[1024];
    const char *p;
    int field;
    ssize_t n;
    int fd;

    snprintf(path, sizeof path, "/proc/%u/stat", pid);
    fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return -1;
    n = read(fd, buf, sizeof buf - 1);
    close(fd);
    if (n <= 0)
        return -1;
    buf[n] = '\0';
    /* comm may hold spaces and ')': fields restart after the last ')' */
    p = strrchr(buf, ')');
    if (!p || p[1] != ' ' || p[2] == '\0')
        return -1;
    p += 2;
    *state = *p;
    /* p is at field 3 (state); walk to field 22 (starttime) */
    for (field = 3; field < 22; field++) {
        p = strchr(p, ' ');
        if (!p)
            return -1;
        p++;
    }
    {
        char *end;
        *starttime = strtoull(p, &end, 10);
        if (end == p)
            return -1;
    }
    return 0;
}

int mock_proc_has_open(unsigned pid, const char *path)
{
    char dirpath[64], target[PATH_MAX];
    struct dirent *de;
    int found = 0;
    DIR *d;

    snprintf(dirpath, sizeof dirpath, "/proc/%u/fd", pid);
    d = opendir(dirpath);
    if (!d)
        return 0;
    while (!found && (de = readdir(d)) != NULL) {
        ssize_t n;
        if (de->d_name[0] == '.')
            continue;
        n = readlinkat(dirfd(d), de->d_name, target, sizeof target - 1);
        if (n <= 0)
            continue;
        target[n] = '\0';
        found = strcmp(target, path) == 0;
    }
    closedir(d);
    return found;
}

/* "<pid>.<gpu>" with both parts plain decimal; anything else (temp files, junk) is skipped. */
static int parse_name(const char *name, unsigned long long *pid, unsigned long long *gpu)
{
    char *end;

    if (name[0] < '0' || name[0] > '9')
        return -1;
    *pid = strtoull(name, &end, 10);
    if (*end != '.' || end[1] < '0' || end[1] > '9')
        return -1;
    *gpu = strtoull(end + 1, &end, 10);
    return *end == '\0' ? 0 : -1;
}

static int by_pid(const void *a, const void *b)
{
    const struct mock_holder *x = a, *y = b;
    return (x->pid > y->pid) - (x->pid < y->pid);
}

static int holder_alive(unsigned pid, unsigned long long starttime, const char *devnode)
{
    unsigned long long now_start;
    char state;

    if (mock_proc_stat(pid, &state, &now_start))
        return 0;
    if (state == 'Z' || state == 'X' || state == 'x')
        return 0;
    if (now_start != starttime)
        return 0; /* the pid was reused by another process */
    return mock_proc_has_open(pid, devnode);
}

int mock_holders(const char *registry, const char *devnode, unsigned gpu,
                 struct mock_holder *out, int cap, unsigned long long *mib_sum)
{
    char real[PATH_MAX], buf[ENTRY_MAX_BYTES];
    struct dirent *de;
    int total = 0;
    DIR *d;

    *mib_sum = 0;
    if (!realpath(devnode, real))
        return 0; /* no device node: nobody can hold it */
    d = opendir(registry);
    if (!d)
        return 0;
    while ((de = readdir(d)) != NULL) {
        unsigned long long npid, ngpu, pid, egpu, mib, start;
        ssize_t len;

        if (parse_name(de->d_name, &npid, &ngpu) || ngpu != gpu || npid == 0 || npid > INT_MAX)
            continue;
        len = read_small(dirfd(d), de->d_name, buf, sizeof buf);
        if (len < 0 || mock_entry_parse(buf, (size_t)len, &pid, &egpu, &mib, &start))
            continue;
        if (pid != npid || egpu != ngpu)
            continue;
        if (!holder_alive((unsigned)pid, start, real))
            continue;
        if (total < cap) {
            out[total].pid = (unsigned)pid;
            out[total].mib = mib;
        }
        total++;
        *mib_sum += mib;
    }
    closedir(d);
    qsort(out, (size_t)(total < cap ? total : cap), sizeof out[0], by_pid);
    return total;
}
