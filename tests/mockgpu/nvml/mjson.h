/* Tiny JSON reader for the mock's flat config and registry files.
 * Streaming: the caller walks objects/arrays with callbacks and reads the
 * scalar values it wants; everything else is skipped. Any syntax error
 * makes the walk return -1, so a malformed file is rejected, never trusted. */
#ifndef MOCKGPU_MJSON_H
#define MOCKGPU_MJSON_H

#include <stddef.h>

typedef struct {
    const char *s;
    size_t n;
    size_t i;
    int depth;
} mj_cur;

/* Called once per object member; must consume the value (read it or mj_skip). */
typedef int (*mj_member_fn)(mj_cur *c, const char *key, void *ctx);
/* Called once per array element; must consume it. */
typedef int (*mj_elem_fn)(mj_cur *c, void *ctx);

void mj_init(mj_cur *c, const char *s, size_t n);
int mj_object(mj_cur *c, mj_member_fn fn, void *ctx);
int mj_array(mj_cur *c, mj_elem_fn fn, void *ctx);
int mj_string(mj_cur *c, char *out, size_t cap);
int mj_uint(mj_cur *c, unsigned long long *out);
int mj_skip(mj_cur *c);
/* 0 when only whitespace is left. */
int mj_end(mj_cur *c);

#endif
