/* Tiny JSON reader, see mjson.h. Strings are limited to ASCII escapes;
 * numbers read as values must be non-negative integers. */
#include "mjson.h"

#include <string.h>

#define MJ_MAX_DEPTH 32

void mj_init(mj_cur *c, const char *s, size_t n)
{
    c->s = s;
    c->n = n;
    c->i = 0;
    c->depth = 0;
}

static void ws(mj_cur *c)
{
    while (c->i < c->n && (c->s[c->i] == ' ' || c->s[c->i] == '\t' ||
                           c->s[c->i] == '\n' || c->s[c->i] == '\r'))
        c->i++;
}

static int peek(mj_cur *c)
{
    ws(c);
    return c->i < c->n ? (unsigned char)c->s[c->i] : -1;
}

static int eat(mj_cur *c, char ch)
{
    if (peek(c) != (unsigned char)ch)
        return -1;
    c->i++;
    return 0;
}

static int hexval(int ch)
{
    if (ch >= '0' && ch <= '9')
        return ch - '0';
    if (ch >= 'a' && ch <= 'f')
        return ch - 'a' + 10;
    if (ch >= 'A' && ch <= 'F')
        return ch - 'A' + 10;
    return -1;
}

/* out may be NULL (skip); a string longer than cap-1 is an error. */
int mj_string(mj_cur *c, char *out, size_t cap)
{
    size_t len = 0;

    if (eat(c, '"'))
        return -1;
    while (c->i < c->n) {
        int ch = (unsigned char)c->s[c->i++];
        if (ch == '"') {
            if (out) {
                if (cap == 0)
                    return -1;
                out[len] = '\0';
            }
            return 0;
        }
        if (ch < 0x20)
            return -1;
        if (ch == '\\') {
            if (c->i >= c->n)
                return -1;
            ch = (unsigned char)c->s[c->i++];
            switch (ch) {
            case '"': case '\\': case '/': break;
            case 'b': ch = '\b'; break;
            case 'f': ch = '\f'; break;
            case 'n': ch = '\n'; break;
            case 'r': ch = '\r'; break;
            case 't': ch = '\t'; break;
            case 'u': {
                int v = 0, k;
                if (c->i + 4 > c->n)
                    return -1;
                for (k = 0; k < 4; k++) {
                    int h = hexval((unsigned char)c->s[c->i++]);
                    if (h < 0)
                        return -1;
                    v = v * 16 + h;
                }
                ch = (v > 0 && v < 0x80) ? v : '?';
                break;
            }
            default:
                return -1;
            }
        }
        if (out) {
            if (len + 1 >= cap)
                return -1;
            out[len] = (char)ch;
        }
        len++;
    }
    return -1;
}

int mj_uint(mj_cur *c, unsigned long long *out)
{
    unsigned long long v = 0;
    size_t start;

    ws(c);
    start = c->i;
    while (c->i < c->n && c->s[c->i] >= '0' && c->s[c->i] <= '9') {
        unsigned d = (unsigned)(c->s[c->i] - '0');
        if (v > (~0ULL - d) / 10)
            return -1;
        v = v * 10 + d;
        c->i++;
    }
    if (c->i == start)
        return -1;
    /* reject fractions/exponents: the mock's numbers are counts */
    if (c->i < c->n && strchr(".eE", c->s[c->i]) && c->s[c->i] != '\0')
        return -1;
    *out = v;
    return 0;
}

static int literal(mj_cur *c, const char *word)
{
    size_t len = strlen(word);

    ws(c);
    if (c->n - c->i < len || memcmp(c->s + c->i, word, len) != 0)
        return -1;
    c->i += len;
    return 0;
}

static int skip_member(mj_cur *c, const char *key, void *ctx)
{
    (void)key;
    (void)ctx;
    return mj_skip(c);
}

static int skip_elem(mj_cur *c, void *ctx)
{
    (void)ctx;
    return mj_skip(c);
}

int mj_skip(mj_cur *c)
{
    int ch = peek(c);

    if (ch == '"')
        return mj_string(c, NULL, 0);
    if (ch == '{')
        return mj_object(c, skip_member, NULL);
    if (ch == '[')
        return mj_array(c, skip_elem, NULL);
    if (ch == 't')
        return literal(c, "true");
    if (ch == 'f')
        return literal(c, "false");
    if (ch == 'n')
        return literal(c, "null");
    if (ch == '-' || (ch >= '0' && ch <= '9')) {
        size_t start = c->i;
        while (c->i < c->n && c->s[c->i] != '\0' && strchr("+-.eE0123456789", c->s[c->i]))
            c->i++;
        return c->i > start ? 0 : -1;
    }
    return -1;
}

int mj_object(mj_cur *c, mj_member_fn fn, void *ctx)
{
    char key[64];

    if (eat(c, '{') || ++c->depth > MJ_MAX_DEPTH)
        return -1;
    if (peek(c) == '}') {
        c->i++;
        c->depth--;
        return 0;
    }
    for (;;) {
        if (peek(c) != '"')
            return -1;
        /* keys longer than any the mock uses are rejected as malformed */
        if (mj_string(c, key, sizeof key))
            return -1;
        if (eat(c, ':') || fn(c, key, ctx))
            return -1;
        if (peek(c) == ',') {
            c->i++;
            continue;
        }
        if (eat(c, '}'))
            return -1;
        c->depth--;
        return 0;
    }
}

int mj_array(mj_cur *c, mj_elem_fn fn, void *ctx)
{
    if (eat(c, '[') || ++c->depth > MJ_MAX_DEPTH)
        return -1;
    if (peek(c) == ']') {
        c->i++;
        c->depth--;
        return 0;
    }
    for (;;) {
        if (fn(c, ctx))
            return -1;
        if (peek(c) == ',') {
            c->i++;
            continue;
        }
        if (eat(c, ']'))
            return -1;
        c->depth--;
        return 0;
    }
}

int mj_end(mj_cur *c)
{
    return peek(c) == -1 ? 0 : -1;
}
