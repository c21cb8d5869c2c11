/* Intrusive min-heap of deadlines (theap.h). */
#include "core/theap.h"

#include <stdlib.h>

static int earlier(const dlock__tentry *a, const dlock__tentry *b)
{
    return a->at < b->at || (a->at == b->at && a->seq < b->seq);
}

static void set(dlock__theap *h, size_t i, dlock__tentry *e)
{
    h->e[i] = e;
    e->idx = (int)i;
}

static void sift_up(dlock__theap *h, size_t i)
{
    dlock__tentry *e = h->e[i];
    while (i > 0 && earlier(e, h->e[(i - 1) / 2])) {
        set(h, i, h->e[(i - 1) / 2]);
        i = (i - 1) / 2;
    }
    set(h, i, e);
}

static void sift_down(dlock__theap *h, size_t i)
{
    dlock__tentry *e = h->e[i];
    for (;;) {
        size_t c = 2 * i + 1;
        if (c >= h->n)
            break;
        if (c + 1 < h->n && earlier(h->e[c + 1], h->e[c]))
            c++;
        if (!earlier(h->e[c], e))
            break;
        set(h, i, h->e[c]);
        i = c;
    }
    set(h, i, e);
}

int dlock__theap_add(dlock__theap *h, dlock__tentry *e, int64_t at)
{
    if (h->n == h->cap) {
        size_t cap = h->cap ? 2 * h->cap : 64;
        dlock__tentry **a = realloc(h->e, cap * sizeof(*a));
        if (!a)
            return -1;
        h->e = a;
        h->cap = cap;
    }
    e->at = at;
    e->seq = ++h->seq;
    set(h, h->n++, e);
    sift_up(h, h->n - 1);
    return 0;
}

void dlock__theap_remove(dlock__theap *h, dlock__tentry *e)
{
    if (e->idx < 0)
        return;
    size_t i = (size_t)e->idx;
    e->idx = -1;
    dlock__tentry *last = h->e[--h->n];
    if (i < h->n) {
        set(h, i, last);
        sift_up(h, i);
        sift_down(h, (size_t)last->idx);
    }
}

void dlock__theap_free(dlock__theap *h)
{
    free(h->e);
    h->e = NULL;
    h->n = h->cap = 0;
}
