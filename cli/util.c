/* Parsing and formatting helpers of the dlock command, apart from main() so
 * that the fuzzers can link them (tests/fuzz). */
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"

int cli_parse_duration(const char *s, int64_t *ms)
{
    if (!s || !*s)
        return -1;
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (errno || end == s || !isfinite(v) || v < 0 || s[0] == '+' || s[0] == '-' ||
        s[0] == ' ')
        return -1;
    double scale;
    if (*end == '\0' || strcmp(end, "s") == 0)
        scale = 1000;
    else if (strcmp(end, "ms") == 0)
        scale = 1;
    else if (strcmp(end, "m") == 0)
        scale = 60000;
    else if (strcmp(end, "h") == 0)
        scale = 3600000;
    else
        return -1;
    double r = v * scale;
    if (r > 365.0 * 24 * 3600 * 1000)   /* a year is plenty, and no overflow */
        return -1;
    *ms = (int64_t)(r + 0.5);
    return 0;
}

const char *cli_fmt_duration(int64_t ms, char *buf, size_t size)
{
    if (ms < 0)
        snprintf(buf, size, "-");
    else if (ms < 1000)
        snprintf(buf, size, "%lld ms", (long long)ms);
    else if (ms < 60000)
        snprintf(buf, size, "%.1f s", (double)ms / 1000.0);
    else if (ms < 3600000)
        snprintf(buf, size, "%lld m %lld s", (long long)(ms / 60000),
                 (long long)((ms % 60000) / 1000));
    else
        snprintf(buf, size, "%lld h %lld m", (long long)(ms / 3600000),
                 (long long)((ms % 3600000) / 60000));
    return buf;
}

/* Length of the valid UTF-8 sequence at p (1..4), or 0 if invalid. */
static int utf8_len(const unsigned char *p)
{
    if (p[0] < 0x80)
        return 1;
    int n = (p[0] & 0xe0) == 0xc0 ? 2 : (p[0] & 0xf0) == 0xe0 ? 3 : (p[0] & 0xf8) == 0xf0 ? 4 : 0;
    if (n == 0 || (n == 2 && p[0] < 0xc2))
        return 0;
    for (int i = 1; i < n; i++)
        if ((p[i] & 0xc0) != 0x80)
            return 0;
    return n;
}

void cli_json_string(FILE *f, const char *s)
{
    const unsigned char *p = (const unsigned char *)s;
    fputc('"', f);
    while (*p) {
        int n = utf8_len(p);
        if (n == 0) {
            fprintf(f, "\\u%04x", *p++);   /* not UTF-8: keep the JSON valid */
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
    fputc('"', f);
}

