/* Parsing and formatting helpers of the dlock command, apart from main() so
 * that the fuzzers can link them (tests/fuzz). */
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cli.h"

int64_t mono_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

#define YEAR_MS (365.0 * 24 * 3600 * 1000)

/* One "<number><unit>" component: its value in ms and the unit's rank
 * (d=5 .. ms=1, 0 = no unit). Returns the characters used, 0 if none. */
static size_t duration_part(const char *s, double *ms, int *rank)
{
    static const struct {
        const char *unit;
        double scale;
        int rank;
    } units[] = {{"ms", 1, 1}, {"s", 1000, 2}, {"m", 60000, 3}, {"h", 3600000, 4},
                 {"d", 86400000, 5}};
    size_t n = 0;
    int digits = 0, dot = 0;
    while ((s[n] >= '0' && s[n] <= '9') || (s[n] == '.' && !dot)) {
        if (s[n] == '.')
            dot = 1;
        else
            digits++;
        n++;
    }
    if (digits == 0 || n > 32)
        return 0;
    char num[40];
    memcpy(num, s, n);
    num[n] = '\0';
    double v = strtod(num, NULL);
    *rank = 0;
    *ms = v * 1000;   /* a bare number is seconds */
    for (size_t k = 0; k < sizeof(units) / sizeof(units[0]); k++) {
        size_t ul = strlen(units[k].unit);
        /* "m" must not take the "m" of "ms" */
        if (strncmp(s + n, units[k].unit, ul) == 0 &&
            !(ul == 1 && units[k].unit[0] == 'm' && s[n + 1] == 's')) {
            *rank = units[k].rank;
            *ms = v * units[k].scale;
            return n + ul;
        }
    }
    return n;
}

int cli_parse_duration(const char *s, int64_t *ms)
{
    if (!s || !*s)
        return -1;
    if (strcmp(s, "inf") == 0 || strcmp(s, "forever") == 0) {
        *ms = CLI_DUR_INF;
        return 0;
    }
    double total = 0;
    int last_rank = 6, parts = 0;
    const char *p = s;
    while (*p) {
        double v;
        int rank;
        size_t n = duration_part(p, &v, &rank);
        if (n == 0)
            return -1;
        /* A bare number stands alone ("90"); units go from large to small,
         * each once ("1h30m", not "30m1h" or "1m1m"). */
        if (rank == 0 ? (parts > 0 || p[n] != '\0') : rank >= last_rank)
            return -1;
        last_rank = rank;
        total += v;
        parts++;
        p += n;
    }
    if (!isfinite(total) || total > YEAR_MS)   /* a year is plenty, and no overflow */
        return -2;
    *ms = (int64_t)(total + 0.5);
    return 0;
}

const char *cli_fmt_duration(int64_t ms, char *buf, size_t size)
{
    if (ms == CLI_DUR_INF)
        snprintf(buf, size, "forever");
    else if (ms < 0)
        snprintf(buf, size, "-");
    else if (ms < 1000)
        snprintf(buf, size, "%lld ms", (long long)ms);
    else if (ms < 60000)
        snprintf(buf, size, "%.1f s", (double)ms / 1000.0);
    else if (ms < 3600000)
        snprintf(buf, size, "%lld m %lld s", (long long)(ms / 60000),
                 (long long)((ms % 60000) / 1000));
    else if (ms < 86400000)
        snprintf(buf, size, "%lld h %lld m", (long long)(ms / 3600000),
                 (long long)((ms % 3600000) / 60000));
    else
        snprintf(buf, size, "%lld d %lld h", (long long)(ms / 86400000),
                 (long long)((ms % 86400000) / 3600000));
    return buf;
}

/* Length of the valid UTF-8 sequence at p (1..4), or 0 if invalid: overlong
 * forms, surrogates and code points above U+10FFFF are invalid too, so that
 * what passes decodes the same in every JSON reader. */
static int utf8_len(const unsigned char *p)
{
    if (p[0] < 0x80)
        return 1;
    int n = (p[0] & 0xe0) == 0xc0 ? 2 : (p[0] & 0xf0) == 0xe0 ? 3 : (p[0] & 0xf8) == 0xf0 ? 4 : 0;
    if (n == 0 || (n == 2 && p[0] < 0xc2) || p[0] > 0xf4)
        return 0;
    for (int i = 1; i < n; i++)
        if ((p[i] & 0xc0) != 0x80)
            return 0;
    if ((p[0] == 0xe0 && p[1] < 0xa0) || (p[0] == 0xed && p[1] >= 0xa0) ||
        (p[0] == 0xf0 && p[1] < 0x90) || (p[0] == 0xf4 && p[1] >= 0x90))
        return 0;
    return n;
}

/* The code point of a valid sequence of n bytes. */
static unsigned utf8_cp(const unsigned char *p, int n)
{
    if (n == 1)
        return p[0];
    unsigned cp = p[0] & (0x7f >> n);
    for (int i = 1; i < n; i++)
        cp = (cp << 6) | (p[i] & 0x3f);
    return cp;
}

int cli_utf8_valid(const char *s)
{
    const unsigned char *p = (const unsigned char *)s;
    while (*p) {
        int n = utf8_len(p);
        if (n == 0)
            return 0;
        p += n;
    }
    return 1;
}

/* Code points a terminal acts on or that reorder text: C1 controls (0x9b is
 * CSI) and the bidirectional overrides and isolates. */
static int unsafe_cp(unsigned cp)
{
    return (cp >= 0x80 && cp <= 0x9f) || cp == 0x200e || cp == 0x200f ||
           (cp >= 0x202a && cp <= 0x202e) || (cp >= 0x2066 && cp <= 0x2069);
}

int cli_has_unsafe(const char *s)
{
    const unsigned char *p = (const unsigned char *)s;
    while (*p) {
        int n = utf8_len(p);
        if (n == 0 || (n > 1 && unsafe_cp(utf8_cp(p, n))) ||
            (n == 1 && ((*p < 0x20 && *p != '\n') || *p == 0x7f)))
            return 1;
        p += n;
    }
    return 0;
}

/* Appends the escaped form of s to out (which has room for 4 bytes a byte). */
static size_t escape_into(const char *s, char *out)
{
    static const char hex[] = "0123456789abcdef";
    const unsigned char *p = (const unsigned char *)s;
    size_t j = 0;
    while (*p) {
        int n = utf8_len(p);
        if (n > 1 && !unsafe_cp(utf8_cp(p, n))) {
            memcpy(out + j, p, (size_t)n);
            j += (size_t)n;
            p += n;
            continue;
        }
        if (n > 1) {   /* an unsafe code point: each of its bytes as \xHH */
            for (int i = 0; i < n; i++, p++) {
                out[j++] = '\\', out[j++] = 'x', out[j++] = hex[*p >> 4], out[j++] = hex[*p & 15];
            }
            continue;
        }
        unsigned char ch = *p++;
        if (ch == '\\') {
            out[j++] = '\\', out[j++] = '\\';
        } else if (ch == '\n') {
            out[j++] = '\\', out[j++] = 'n';
        } else if (ch == '\t') {
            out[j++] = '\\', out[j++] = 't';
        } else if (ch == '\r') {
            out[j++] = '\\', out[j++] = 'r';
        } else if (ch < 0x20 || ch >= 0x7f) {
            out[j++] = '\\', out[j++] = 'x', out[j++] = hex[ch >> 4], out[j++] = hex[ch & 15];
        } else {
            out[j++] = (char)ch;
        }
    }
    out[j] = '\0';
    return j;
}

char *cli_escape(const char *s)
{
    if (!s)
        s = "";
    char *out = malloc(strlen(s) * 4 + 1);
    if (out)
        escape_into(s, out);
    return out;
}

const char *cli_esc(const char *s, char *buf, size_t size)
{
    if (size == 0)
        return "";
    char *full = cli_escape(s);
    if (!full) {
        snprintf(buf, size, "?");
        return buf;
    }
    size_t n = strlen(full);
    if (n < size) {
        memcpy(buf, full, n + 1);
    } else if (size > 4) {
        /* Cut on a character boundary, not in the middle of a sequence. */
        size_t k = size - 4;
        while (k > 0 && ((unsigned char)full[k] & 0xc0) == 0x80)
            k--;
        memcpy(buf, full, k);
        memcpy(buf + k, "...", 4);
    } else {
        buf[0] = '\0';
    }
    free(full);
    return buf;
}

/* Writes s as JSON string contents; invalid UTF-8 bytes become U+FFFD. */
static void json_chars(FILE *f, const char *s)
{
    const unsigned char *p = (const unsigned char *)s;
    while (*p) {
        int n = utf8_len(p);
        if (n == 0) {
            fputs("\\ufffd", f);
            p++;
            continue;
        }
        if (n > 1) {
            fwrite(p, 1, (size_t)n, f);
            p += n;
            continue;
        }
        switch (*p) {
        case '"': fputs("\\\"", f); break;
        case '\\': fputs("\\\\", f); break;
        case '\n': fputs("\\n", f); break;
        case '\r': fputs("\\r", f); break;
        case '\t': fputs("\\t", f); break;
        default:
            if (*p < 0x20 || *p == 0x7f)
                fprintf(f, "\\u%04x", *p);
            else
                fputc(*p, f);
        }
        p++;
    }
}

void cli_json_string(FILE *f, const char *s)
{
    fputc('"', f);
    json_chars(f, s);
    fputc('"', f);
}

static void base64(FILE *f, const unsigned char *p, size_t n)
{
    static const char tab[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    for (size_t i = 0; i < n; i += 3) {
        unsigned v = (unsigned)p[i] << 16;
        if (i + 1 < n)
            v |= (unsigned)p[i + 1] << 8;
        if (i + 2 < n)
            v |= p[i + 2];
        fputc(tab[(v >> 18) & 63], f);
        fputc(tab[(v >> 12) & 63], f);
        fputc(i + 1 < n ? tab[(v >> 6) & 63] : '=', f);
        fputc(i + 2 < n ? tab[v & 63] : '=', f);
    }
}

void cli_json_field(FILE *f, const char *key, const char *s)
{
    fprintf(f, "\"%s\":", key);
    cli_json_string(f, s);
    if (!cli_utf8_valid(s)) {
        fprintf(f, ",\"%s_base64\":\"", key);
        base64(f, (const unsigned char *)s, strlen(s));
        fputc('"', f);
    }
}

int cli_parse_count(const char *s, int64_t *n)
{
    int64_t v = 0;
    if (!s || !*s)
        return -1;
    for (const char *p = s; *p; p++) {
        if (*p < '0' || *p > '9' || v > DLOCK_COUNT_MAX)
            return -1;
        v = v * 10 + (*p - '0');
    }
    if (v < 1 || v > DLOCK_COUNT_MAX)
        return -1;
    *n = v;
    return 0;
}

void cli_fit(char *s, size_t cols)
{
    if (cols < 4)
        return;
    /* Code points, one column each (what cli_esc leaves is printable). */
    size_t n = 0, cut = 0, i = 0;
    for (; s[i]; i++) {
        if (((unsigned char)s[i] & 0xc0) == 0x80)
            continue;
        if (n == cols - 4)
            cut = i;
        if (++n > cols - 1) {
            memcpy(s + cut, "...", 4);
            return;
        }
    }
}
