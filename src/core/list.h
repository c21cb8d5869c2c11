/* Intrusive circular doubly-linked list (the head is a sentinel node). */
#ifndef DLOCK_LIST_H
#define DLOCK_LIST_H

#include <stddef.h>

typedef struct dlock__list {
    struct dlock__list *next, *prev;
} dlock__list;

#define DLOCK__CONTAINER_OF(ptr, type, field) \
    ((type *)(void *)((char *)(ptr) - offsetof(type, field)))

static inline void dlock__list_init(dlock__list *h) { h->next = h->prev = h; }
static inline int dlock__list_empty(const dlock__list *h) { return h->next == h; }

static inline void dlock__list_push_back(dlock__list *h, dlock__list *n)
{
    n->prev = h->prev;
    n->next = h;
    h->prev->next = n;
    h->prev = n;
}

static inline void dlock__list_remove(dlock__list *n)
{
    n->prev->next = n->next;
    n->next->prev = n->prev;
    n->next = n->prev = n;
}

#define DLOCK__LIST_FOREACH(it, head) for ((it) = (head)->next; (it) != (head); (it) = (it)->next)

#endif
