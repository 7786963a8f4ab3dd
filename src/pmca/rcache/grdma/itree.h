/*
 * The grdma registration index: an interval index with its own lock.
 *
 * Intervals [base, bound) with a key, kept sorted by (base, key) in blocks
 * of up to BLOCK entries (see block_t for their layout), with a directory
 * of the blocks: each block's first (base, key) for a binary
 * search, and a max-tree (a segment tree) of each block's largest bound.
 * It is an augmented B-tree of height two, laid out for the covering lookup
 * a transport makes per message: a search in the directory's small arrays,
 * which stay in cache, then a few lines of one block, where a pointer-based
 * balanced tree of 100 k nodes misses the cache at most of its ~20 levels.
 *
 * - "an interval containing [lo, hi)": the last block starting at or before
 *   lo, then (when none there reaches hi) any earlier block whose largest
 *   bound reaches hi, found by one descent of the max-tree: O(log n + BLOCK).
 * - "every interval overlapping [lo, hi)": the max-tree leads only to blocks
 *   holding an answer (plus the last one starting before hi), so the cost
 *   grows with the answers, not with the index: O(log n + BLOCK * (k + 1)).
 * - insert/remove: a move inside one block; a full block splits, an empty
 *   one leaves the directory (O(n / BLOCK) to rebuild the max-tree then).
 *
 * Locking rule (the one libfabric 2.5.1 broke, fixed by d27cfffdc): nothing
 * is allocated or freed with the index's mutex held.  An operation that
 * needs memory (a block for a split, a larger directory) drops the lock,
 * allocates, and starts again; what it frees is freed after unlocking.  An
 * allocator that calls madvise() or munmap() never runs inside the critical
 * section, whatever a release hook does.
 *
 * The lookup entry point also answers "was anything released since the
 * cache last applied the release events?" from the hooks' own counters (see
 * pmca_itree_watch), so that a transport's lookup is one native call.
 */
#ifndef PMCA_ITREE_H
#define PMCA_ITREE_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>


#define BLOCK 48
/* Every SPACING-th base is repeated in the block's first cache line. */
#define SPACING 8
#define SAMPLES (BLOCK / SPACING)
/* Neighbours this small together are merged after a removal. */
#define MERGE_AT (BLOCK / 2)

/* find_covering's answer when nothing covers (keys are below 2**63). */
#define LOOKUP_NONE (-1)
/* Every this many lookups one takes the full path anyway, so that periodic
 * work hung on the full path (health checks) cannot starve. */
#define FULL_PATH_EVERY 4096

/*
 * Laid out for the lookup: the first cache line holds the count, the largest
 * bound and every SPACING-th base, which name the one line of base[] to
 * read; a bound and its key share a line.  Three lines per block visited.
 */
typedef struct block {
    uint32_t count;
    uint64_t max_bound;
    uint64_t sample[SAMPLES]; /* sample[i] = base[i * SPACING] */
    uint64_t base[BLOCK];
    struct entry {
        uint64_t bound, key;
    } entry[BLOCK];
} __attribute__((aligned(64))) block_t;

typedef struct directory {
    size_t capacity; /* a power of two */
    block_t **blocks;
    uint64_t *first_base, *first_key;
    /* max[capacity + i]: block i's largest bound (0 past the last block);
     * max[i] for 1 <= i < capacity: the larger of max[2i] and max[2i + 1]. */
    uint64_t *max;
} directory_t;

typedef uint32_t (*check_fn)(void);

typedef struct itree {
    pthread_mutex_t lock;
    directory_t *dir;
    size_t blocks, size;
    block_t *spare; /* allocated outside the lock, for the next split */
    int closed;
    /* The release watch: the hooks' producer position and drop counter,
     * their values when the cache last applied every release, and the
     * hooks' overwrite check. */
    const uint64_t *head, *dropped;
    uint64_t seen_head, seen_dropped;
    /* Nonzero while the cache holds delivered releases it has not applied. */
    const uint64_t *pending;
    check_fn check;
    uint32_t overwritten; /* what the check reported, for the caller's full path */
    /* pmca_itree_lookup's answers besides a key: none covers; take the full path. */
    uintptr_t none_answer, slow_answer;
    void (*take_reference)(uintptr_t);
    /* Lookups that reached the index, and those of them sent to the full
     * path (both under the lock); lookups sent there before taking it (a
     * bad range, an overwrite found), counted atomically: they are rare. */
    uint64_t lookups, full_lookups, full_unlocked;
    uint64_t page_mask;
} itree_t;

enum { OK = 0, NEED_BLOCK = 1, NEED_DIRECTORY = 2 };

typedef struct {
    uint64_t *keys;
    size_t max, count;
} collect_t;

/* How many of the sorted values[0..n) are <= x. */
static inline size_t count_at_most(const uint64_t *values, size_t n, uint64_t x)
{
    size_t low = 0, high = n;
    while (low < high) {
        size_t mid = (low + high) / 2;
        if (values[mid] <= x)
            low = mid + 1;
        else
            high = mid;
    }
    return low;
}

/* itree_blocks.c: the index itself; every call is made with t->lock held,
 * except directory_new and free_contents (which allocate and free). */
directory_t *directory_new(size_t capacity);
void max_rebuild(directory_t *d, size_t blocks);
int64_t find_covering(const itree_t *t, uint64_t lo, uint64_t hi);
void collect(const directory_t *d, size_t node, size_t low, size_t width, size_t limit,
             uint64_t lo, uint64_t hi, collect_t *out);
int insert_locked(itree_t *t, uint64_t base, uint64_t bound, uint64_t key);
int remove_locked(itree_t *t, uint64_t base, uint64_t key, block_t **freed);
void free_contents(directory_t *d, size_t blocks, block_t *spare);

#endif
