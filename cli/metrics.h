/* dlock exporter: rendering a pass in Prometheus' text format, and what the
 * exporter remembers of each lock between passes (metrics.c). */
#ifndef DLOCK_CLI_METRICS_H
#define DLOCK_CLI_METRICS_H

#include "monitor.h"

typedef struct mon_memory mon_memory;

mon_memory *mon_memory_new(void);
void mon_memory_free(mon_memory *m);
/* After a pass that read Redis: the locks held now (with since when each
 * holder has been seen), and those seen held in the last 15 minutes, free
 * now; at most `limit` names (0: no limit). now: monotonic ms. 0, or -1 when
 * out of memory (the memory is left as it was). */
int mon_memory_update(mon_memory *m, const mon_pass *p, int64_t now, size_t limit);

typedef struct mon_status {
    int up;                  /* the pass read Redis */
    const char *error;       /* why not */
    uint64_t passes, errors; /* since the start */
    size_t max_keys, max_holders;
    int64_t started_unix_ms; /* when the pass started */
    int64_t now_ms;          /* monotonic, at the pass's end */
} mon_status;

/* The text of /metrics (malloc'd, *len bytes), or NULL when out of memory.
 * m and p (NULL when the pass failed) as they were after mon_memory_update. */
char *mon_render(mon_memory *m, const mon_pass *p, const holder_map *map, const mon_status *st,
                 size_t *len);

#endif
