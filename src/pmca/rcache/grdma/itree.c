/*
 * The grdma index's exported interface (see itree.h): the locking, the
 * allocation outside the lock, and the cache's one-call lookup.
 */
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "itree.h"

#define EXPORT __attribute__((visibility("default")))

EXPORT itree_t *pmca_itree_create(uint64_t seed)
{
    (void)seed; /* no randomised structure any more: kept for the ABI */
    itree_t *t = calloc(1, sizeof(*t));
    if (t == NULL)
        return NULL;
    t->dir = directory_new(1);
    if (t->dir == NULL) {
        free(t);
        return NULL;
    }
    pthread_mutex_init(&t->lock, NULL);
    t->page_mask = (uint64_t)sysconf(_SC_PAGESIZE) - 1;
    return t;
}

/*
 * Frees every interval; the index answers "take the full path" (lookups)
 * or -EBADF from then on, but its handle stays valid until destroy, so that a
 * thread racing with the close gets an answer instead of a freed lock.
 */
EXPORT void pmca_itree_close(itree_t *t)
{
    pthread_mutex_lock(&t->lock);
    directory_t *d = t->dir;
    size_t blocks = t->blocks;
    block_t *spare = t->spare;
    t->dir = NULL;
    t->spare = NULL;
    t->blocks = t->size = 0;
    t->closed = 1;
    t->head = t->dropped = t->pending = NULL;
    t->check = NULL;
    pthread_mutex_unlock(&t->lock);
    free_contents(d, blocks, spare);
}

EXPORT void pmca_itree_destroy(itree_t *t)
{
    if (t == NULL)
        return;
    pmca_itree_close(t);
    pthread_mutex_destroy(&t->lock);
    free(t);
}

/* 0, -ENOMEM (nothing changed), -EEXIST (same base and key already there) or -EBADF. */
EXPORT int pmca_itree_insert(itree_t *t, uint64_t base, uint64_t bound, uint64_t key)
{
    block_t *block = NULL;
    directory_t *grown = NULL, *old = NULL;
    int rc;
    for (;;) {
        pthread_mutex_lock(&t->lock);
        if (t->closed) {
            rc = -EBADF;
        } else {
            if (block != NULL && t->spare == NULL) {
                t->spare = block;
                block = NULL;
            }
            if (grown != NULL && grown->capacity > t->dir->capacity) {
                memcpy(grown->blocks, t->dir->blocks, t->blocks * sizeof(*grown->blocks));
                memcpy(grown->first_base, t->dir->first_base, t->blocks * sizeof(uint64_t));
                memcpy(grown->first_key, t->dir->first_key, t->blocks * sizeof(uint64_t));
                old = t->dir;
                t->dir = grown;
                grown = NULL;
                max_rebuild(t->dir, t->blocks);
            }
            rc = insert_locked(t, base, bound, key);
        }
        size_t capacity = t->dir != NULL ? t->dir->capacity : 0;
        pthread_mutex_unlock(&t->lock);
        free(old); /* after the lock, like everything below */
        old = NULL;
        if (rc == NEED_BLOCK && block == NULL) {
            block = aligned_alloc(64, sizeof(*block));
            if (block == NULL) {
                rc = -ENOMEM;
                break;
            }
        } else if (rc == NEED_DIRECTORY) {
            free(grown);
            grown = directory_new(capacity * 2);
            if (grown == NULL) {
                rc = -ENOMEM;
                break;
            }
        } else if (rc != NEED_BLOCK) {
            break;
        }
    }
    free(block);
    free(grown);
    return rc;
}

/* 0, -ENOENT or -EBADF. */
EXPORT int pmca_itree_remove(itree_t *t, uint64_t base, uint64_t key)
{
    block_t *freed = NULL;
    pthread_mutex_lock(&t->lock);
    int rc = t->closed ? -EBADF : remove_locked(t, base, key, &freed);
    pthread_mutex_unlock(&t->lock);
    free(freed); /* after the lock */
    return rc;
}

/*
 * The key of an interval containing [lo, hi), or -1.  The bounds are
 * addresses and typed so: ctypes converts a Python int to a pointer
 * argument in a third of the time it takes for a uint64_t.
 */
EXPORT int64_t pmca_itree_find_covering(itree_t *t, uintptr_t lo, uintptr_t hi)
{
    pthread_mutex_lock(&t->lock);
    int64_t key = find_covering(t, lo, hi);
    pthread_mutex_unlock(&t->lock);
    return key;
}

/*
 * What the cache watches to know, in one load each, whether any release
 * was published, lost or delivered since it last applied every release:
 * the hooks' producer position and drop counter (NULL: no hooks, nothing
 * to watch), the cache's own "releases delivered, not applied" word, and
 * the hooks' overwrite check, run first on every lookup so that a patch
 * someone wrote over is noticed before a registration is trusted.
 */
EXPORT void pmca_itree_watch(itree_t *t, const uint64_t *head, const uint64_t *dropped,
                             const uint64_t *pending, check_fn check)
{
    pthread_mutex_lock(&t->lock);
    if (!t->closed) {
        t->head = head;
        t->dropped = dropped;
        t->pending = pending;
        t->check = check;
        t->seen_head = UINT64_MAX; /* nothing applied yet */
    }
    pthread_mutex_unlock(&t->lock);
}

/* Every release up to these counter values has been applied to the index. */
EXPORT void pmca_itree_synced(itree_t *t, uint64_t head, uint64_t dropped)
{
    pthread_mutex_lock(&t->lock);
    t->seen_head = head;
    t->seen_dropped = dropped;
    pthread_mutex_unlock(&t->lock);
}

/*
 * What pmca_itree_lookup answers when no interval covers, and when the
 * caller must take its full path; and what it calls on any answer before
 * returning it (NULL: nothing), for a caller that receives each answer as
 * a new reference (ctypes' py_object results: give it Py_IncRef).
 */
EXPORT void pmca_itree_answers(itree_t *t, uintptr_t none, uintptr_t slow,
                               void (*take_reference)(uintptr_t))
{
    pthread_mutex_lock(&t->lock);
    t->none_answer = none;
    t->slow_answer = slow;
    t->take_reference = take_reference;
    pthread_mutex_unlock(&t->lock);
}

/* The overwrite check's findings since the last call (0: none), for the
 * caller to react to. */
EXPORT uint32_t pmca_itree_take_overwrites(itree_t *t)
{
    return __atomic_exchange_n(&t->overwritten, 0, __ATOMIC_ACQ_REL);
}

/*
 * The cache's lookup in one call: the key of an interval containing the
 * pages of [address, address + size), or the "none" answer, or the "slow"
 * answer when the caller must take its full path (a release to apply, a bad
 * range, a closed index, an overwrite the check found: see
 * pmca_itree_take_overwrites).  A cache whose keys are its registration
 * objects gets the object itself back, with nothing to convert or look up.
 */
EXPORT uintptr_t pmca_itree_lookup(itree_t *t, uintptr_t address, uintptr_t size)
{
    uint64_t lo = address & ~t->page_mask, hi;
    /* The full path names what is wrong with a range, or handles the rare
     * one at the top of the address space. */
    uintptr_t answer = t->slow_answer;
    if (size == 0 || (address | size) >> 63 != 0 ||
        __builtin_add_overflow(address, size + t->page_mask, &hi))
        goto unlocked_full;
    hi &= ~t->page_mask;
    check_fn check = __atomic_load_n(&t->check, __ATOMIC_ACQUIRE);
    if (check != NULL) { /* outside the index lock: it takes the hooks' patch lock */
        uint32_t mask = check();
        if (mask != 0) {
            __atomic_fetch_or(&t->overwritten, mask, __ATOMIC_ACQ_REL);
            goto unlocked_full;
        }
    }
    pthread_mutex_lock(&t->lock);
    if (t->closed)
        answer = t->slow_answer;
    else if (++t->lookups % FULL_PATH_EVERY == 0 ||
             (t->pending != NULL && __atomic_load_n(t->pending, __ATOMIC_ACQUIRE) != 0) ||
             (t->head != NULL &&
              (__atomic_load_n(t->head, __ATOMIC_ACQUIRE) != t->seen_head ||
               __atomic_load_n(t->dropped, __ATOMIC_ACQUIRE) != t->seen_dropped))) {
        /* The full path: counted here, where it branches off (the fast
         * path's count is what is left of t->lookups: nothing added to it). */
        t->full_lookups++;
        answer = t->slow_answer;
    } else {
        int64_t key = find_covering(t, lo, hi);
        answer = key >= 0 ? (uintptr_t)key : t->none_answer;
    }
    pthread_mutex_unlock(&t->lock);
    goto out;
unlocked_full:
    __atomic_fetch_add(&t->full_unlocked, 1, __ATOMIC_RELAXED);
out:
    /* The caller's lock (the GIL) keeps a found object alive until here. */
    if (t->take_reference != NULL)
        t->take_reference(answer);
    return answer;
}

/*
 * How pmca_itree_lookup answered so far: counts[0] lookups answered by the
 * index itself (a key or "none"), counts[1] lookups sent to the caller's
 * full path (releases to apply, every FULL_PATH_EVERY-th, a bad range, an
 * overwrite found).  Lookups on a closed index are in neither.  Valid after
 * close (until destroy).
 */
EXPORT void pmca_itree_lookup_counts(itree_t *t, uint64_t counts[2])
{
    pthread_mutex_lock(&t->lock);
    uint64_t full = t->full_lookups;
    counts[0] = t->lookups - full;
    pthread_mutex_unlock(&t->lock);
    counts[1] = full + __atomic_load_n(&t->full_unlocked, __ATOMIC_RELAXED);
}

/*
 * How many intervals overlap [lo, hi); the first `max` of their keys (in
 * (base, key) order) go to keys[].  A caller that gets more than `max` asks
 * again with a larger array.  (size_t)-1 when closed.
 */
EXPORT size_t pmca_itree_overlapping(itree_t *t, uint64_t lo, uint64_t hi, uint64_t *keys,
                                     size_t max)
{
    collect_t out = {keys, max, 0};
    pthread_mutex_lock(&t->lock);
    if (t->closed) {
        out.count = (size_t)-1;
    } else if (t->blocks > 0 && lo < hi) {
        /* blocks starting before hi: count_at_most(hi - 1) */
        size_t limit = count_at_most(t->dir->first_base, t->blocks, hi - 1);
        collect(t->dir, 1, 0, t->dir->capacity, limit, lo, hi, &out);
    }
    pthread_mutex_unlock(&t->lock);
    return out.count;
}

EXPORT size_t pmca_itree_size(itree_t *t)
{
    pthread_mutex_lock(&t->lock);
    size_t size = t->size;
    pthread_mutex_unlock(&t->lock);
    return size;
}

/* Empties the index; the memory is freed after the lock is dropped. */
EXPORT int pmca_itree_clear(itree_t *t)
{
    directory_t *fresh = directory_new(1);
    if (fresh == NULL)
        return -ENOMEM;
    pthread_mutex_lock(&t->lock);
    if (t->closed) {
        pthread_mutex_unlock(&t->lock);
        free(fresh);
        return -EBADF;
    }
    directory_t *d = t->dir;
    size_t blocks = t->blocks;
    t->dir = fresh;
    t->blocks = t->size = 0;
    pthread_mutex_unlock(&t->lock);
    free_contents(d, blocks, NULL);
    return 0;
}
