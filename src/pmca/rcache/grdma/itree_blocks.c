/* The grdma index's blocks and directory (see itree.h). */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "itree.h"

/* -- directory -------------------------------------------------------------- */

directory_t *directory_new(size_t capacity)
{
    /* blocks, first_base, first_key: capacity words each; max: twice that */
    directory_t *d = malloc(sizeof(*d) + 5 * capacity * sizeof(uint64_t));
    if (d == NULL)
        return NULL;
    uint64_t *storage = (uint64_t *)(d + 1);
    d->capacity = capacity;
    d->blocks = (block_t **)storage;
    d->first_base = storage + capacity;
    d->first_key = storage + 2 * capacity;
    d->max = storage + 3 * capacity;
    memset(d->max, 0, 2 * capacity * sizeof(uint64_t));
    return d;
}

void max_rebuild(directory_t *d, size_t blocks)
{
    size_t cap = d->capacity;
    for (size_t i = 0; i < cap; i++)
        d->max[cap + i] = i < blocks ? d->blocks[i]->max_bound : 0;
    for (size_t i = cap - 1; i >= 1; i--)
        d->max[i] = d->max[2 * i] > d->max[2 * i + 1] ? d->max[2 * i] : d->max[2 * i + 1];
}

static void max_update(directory_t *d, size_t index)
{
    size_t i = d->capacity + index;
    d->max[i] = d->blocks[index]->max_bound;
    for (i /= 2; i >= 1; i /= 2)
        d->max[i] = d->max[2 * i] > d->max[2 * i + 1] ? d->max[2 * i] : d->max[2 * i + 1];
}

/* Some block among the first `limit` whose largest bound is >= hi, or -1. */
static ptrdiff_t first_reaching(const directory_t *d, size_t node, size_t low, size_t width,
                                size_t limit, uint64_t hi)
{
    if (low >= limit || d->max[node] < hi)
        return -1;
    if (width == 1)
        return (ptrdiff_t)low;
    ptrdiff_t found = first_reaching(d, 2 * node, low, width / 2, limit, hi);
    if (found >= 0)
        return found;
    return first_reaching(d, 2 * node + 1, low + width / 2, width / 2, limit, hi);
}

static void set_first(itree_t *t, size_t index)
{
    block_t *b = t->dir->blocks[index];
    t->dir->first_base[index] = b->base[0];
    t->dir->first_key[index] = b->entry[0].key;
}

static void refresh_samples(block_t *b)
{
    for (uint32_t i = 0; i * SPACING < b->count; i++)
        b->sample[i] = b->base[i * SPACING];
}

static void refresh_max(block_t *b)
{
    uint64_t m = 0;
    for (uint32_t i = 0; i < b->count; i++)
        if (b->entry[i].bound > m)
            m = b->entry[i].bound;
    b->max_bound = m;
}

/* -- searching ----------------------------------------------------------------- */

static inline int before(uint64_t base, uint64_t key, uint64_t other_base, uint64_t other_key)
{
    return base < other_base || (base == other_base && key < other_key);
}

/* The block that holds, or would hold, (base, key); blocks >= 1. */
static size_t block_for(const itree_t *t, uint64_t base, uint64_t key)
{
    const directory_t *d = t->dir;
    size_t low = 0, high = t->blocks;
    while (low < high) { /* how many blocks start at or before (base, key) */
        size_t mid = (low + high) / 2;
        if (!before(base, key, d->first_base[mid], d->first_key[mid]))
            low = mid + 1;
        else
            high = mid;
    }
    return low > 0 ? low - 1 : 0;
}

/* Where (base, key) is, or would go, inside b. */
static uint32_t slot_for(const block_t *b, uint64_t base, uint64_t key)
{
    uint32_t low = 0, high = b->count;
    while (low < high) {
        uint32_t mid = (low + high) / 2;
        if (before(b->base[mid], b->entry[mid].key, base, key))
            low = mid + 1;
        else
            high = mid;
    }
    return low;
}

/* How many of b's bases are <= x: the samples pick one line of base[]. */
static inline uint32_t block_at_most(const block_t *b, uint64_t x)
{
    uint32_t group = 0;
    while (group < SAMPLES && group * SPACING < b->count && b->sample[group] <= x)
        group++;
    if (group == 0)
        return 0;
    uint32_t i = (group - 1) * SPACING + 1, end = group * SPACING;
    if (end > b->count)
        end = b->count;
    while (i < end && b->base[i] <= x)
        i++;
    return i;
}

int64_t find_covering(const itree_t *t, uint64_t lo, uint64_t hi)
{
    if (t->blocks == 0)
        return LOOKUP_NONE;
    const directory_t *d = t->dir;
    size_t starting = count_at_most(d->first_base, t->blocks, lo);
    if (starting == 0)
        return LOOKUP_NONE;
    /* The last block starting at or before lo: the nearest candidates. */
    const block_t *b = d->blocks[starting - 1];
    if (b->max_bound >= hi) {
        for (uint32_t i = block_at_most(b, lo); i-- > 0;)
            if (b->entry[i].bound >= hi)
                return (int64_t)b->entry[i].key;
    }
    /* Every base in the blocks before it is <= lo: any bound reaching hi does. */
    ptrdiff_t earlier = first_reaching(d, 1, 0, d->capacity, starting - 1, hi);
    if (earlier < 0)
        return LOOKUP_NONE;
    b = d->blocks[earlier];
    for (uint32_t i = 0; i < b->count; i++)
        if (b->entry[i].bound >= hi)
            return (int64_t)b->entry[i].key;
    return LOOKUP_NONE; /* not reached: the max-tree said one is there */
}

static void collect_block(const block_t *b, uint64_t lo, uint64_t hi, collect_t *out)
{
    for (uint32_t i = 0; i < b->count && b->base[i] < hi; i++) {
        if (b->entry[i].bound > lo) {
            if (out->count < out->max)
                out->keys[out->count] = b->entry[i].key;
            out->count++;
        }
    }
}

/* Blocks among the first `limit` with a bound above lo, in order. */
void collect(const directory_t *d, size_t node, size_t low, size_t width, size_t limit,
                    uint64_t lo, uint64_t hi, collect_t *out)
{
    if (low >= limit || d->max[node] <= lo)
        return;
    if (width == 1) {
        collect_block(d->blocks[low], lo, hi, out);
        return;
    }
    collect(d, 2 * node, low, width / 2, limit, lo, hi, out);
    collect(d, 2 * node + 1, low + width / 2, width / 2, limit, lo, hi, out);
}

/* -- changing ------------------------------------------------------------------ */

/* Opens a slot for a new block at `index` (capacity permitting). */
static void directory_insert(itree_t *t, size_t index, block_t *b)
{
    directory_t *d = t->dir;
    size_t move = t->blocks - index;
    memmove(d->blocks + index + 1, d->blocks + index, move * sizeof(*d->blocks));
    memmove(d->first_base + index + 1, d->first_base + index, move * sizeof(uint64_t));
    memmove(d->first_key + index + 1, d->first_key + index, move * sizeof(uint64_t));
    d->blocks[index] = b;
    t->blocks++;
    set_first(t, index);
}

/* Takes block `index` out of the directory; returns it. */
static block_t *directory_remove(itree_t *t, size_t index)
{
    directory_t *d = t->dir;
    block_t *b = d->blocks[index];
    size_t move = t->blocks - index - 1;
    memmove(d->blocks + index, d->blocks + index + 1, move * sizeof(*d->blocks));
    memmove(d->first_base + index, d->first_base + index + 1, move * sizeof(uint64_t));
    memmove(d->first_key + index, d->first_key + index + 1, move * sizeof(uint64_t));
    t->blocks--;
    return b;
}

static void block_put(block_t *b, uint32_t slot, uint64_t base, uint64_t bound, uint64_t key)
{
    uint32_t move = b->count - slot;
    memmove(b->base + slot + 1, b->base + slot, move * sizeof(*b->base));
    memmove(b->entry + slot + 1, b->entry + slot, move * sizeof(*b->entry));
    b->base[slot] = base;
    b->entry[slot].bound = bound;
    b->entry[slot].key = key;
    b->count++;
    if (bound > b->max_bound)
        b->max_bound = bound;
    refresh_samples(b);
}

/* Moves b's entries from `from` on to the end of `to`. */
static void block_move_tail(block_t *b, uint32_t from, block_t *to)
{
    uint32_t n = b->count - from;
    memcpy(to->base + to->count, b->base + from, n * sizeof(*b->base));
    memcpy(to->entry + to->count, b->entry + from, n * sizeof(*b->entry));
    to->count += n;
    b->count = from;
    refresh_max(b);
    refresh_max(to);
    refresh_samples(b);
    refresh_samples(to);
}

int insert_locked(itree_t *t, uint64_t base, uint64_t bound, uint64_t key)
{
    if (t->blocks == 0) {
        if (t->spare == NULL)
            return NEED_BLOCK;
        block_t *b = t->spare;
        t->spare = NULL;
        b->count = 0;
        b->max_bound = 0;
        block_put(b, 0, base, bound, key);
        directory_insert(t, 0, b);
        max_rebuild(t->dir, t->blocks);
        t->size++;
        return OK;
    }
    size_t index = block_for(t, base, key);
    block_t *b = t->dir->blocks[index];
    uint32_t slot = slot_for(b, base, key);
    if (slot < b->count && b->base[slot] == base && b->entry[slot].key == key)
        return -EEXIST;
    if (b->count < BLOCK) {
        block_put(b, slot, base, bound, key);
        if (slot == 0)
            set_first(t, index);
        max_update(t->dir, index);
        t->size++;
        return OK;
    }
    if (t->spare == NULL)
        return NEED_BLOCK;
    if (t->blocks == t->dir->capacity)
        return NEED_DIRECTORY;
    block_t *upper = t->spare;
    t->spare = NULL;
    upper->count = 0;
    block_move_tail(b, BLOCK / 2, upper);
    if (slot <= BLOCK / 2)
        block_put(b, slot, base, bound, key);
    else
        block_put(upper, slot - BLOCK / 2, base, bound, key);
    set_first(t, index);
    directory_insert(t, index + 1, upper);
    max_rebuild(t->dir, t->blocks);
    t->size++;
    return OK;
}

/* Returns 0 or -ENOENT; a block it emptied goes to *freed (or the spare). */
int remove_locked(itree_t *t, uint64_t base, uint64_t key, block_t **freed)
{
    if (t->blocks == 0)
        return -ENOENT;
    size_t index = block_for(t, base, key);
    block_t *b = t->dir->blocks[index];
    uint32_t slot = slot_for(b, base, key);
    if (slot >= b->count || b->base[slot] != base || b->entry[slot].key != key)
        return -ENOENT;
    uint64_t bound = b->entry[slot].bound;
    uint32_t move = b->count - slot - 1;
    memmove(b->base + slot, b->base + slot + 1, move * sizeof(*b->base));
    memmove(b->entry + slot, b->entry + slot + 1, move * sizeof(*b->entry));
    b->count--;
    refresh_samples(b);
    t->size--;
    block_t *gone = NULL;
    if (b->count == 0) {
        gone = directory_remove(t, index);
    } else if (index + 1 < t->blocks && b->count + t->dir->blocks[index + 1]->count <= MERGE_AT) {
        block_t *next = t->dir->blocks[index + 1];
        block_move_tail(next, 0, b);
        gone = directory_remove(t, index + 1);
        set_first(t, index);
    } else {
        if (bound == b->max_bound)
            refresh_max(b);
        if (slot == 0)
            set_first(t, index);
        max_update(t->dir, index);
    }
    if (gone != NULL) {
        max_rebuild(t->dir, t->blocks);
        if (t->spare == NULL)
            t->spare = gone;
        else
            *freed = gone;
    }
    return 0;
}

void free_contents(directory_t *d, size_t blocks, block_t *spare)
{
    if (d != NULL) {
        for (size_t i = 0; i < blocks; i++)
            free(d->blocks[i]);
        free(d);
    }
    free(spare);
}
