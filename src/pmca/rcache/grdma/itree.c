/*
 * The grdma registration index: an interval tree with its own lock.
 *
 * A treap ordered by (base, key) where every node also records the largest
 * bound in its subtree.  Insert, remove and "an interval containing
 * [lo, hi)" walk one path: O(log n) expected.  "Every interval overlapping
 * [lo, hi)" prunes any subtree that ends at or before lo and, going right,
 * any node that starts at or after hi: O(log n + k) expected for k answers
 * (each subtree it enters holds at least one answer or is on the path).
 *
 * Locking rule (the one libfabric 2.5.1 broke, fixed by d27cfffdc): nothing
 * is allocated or freed with the tree's mutex held.  A node is allocated
 * before the lock is taken and freed after it is dropped, so an allocator
 * that calls madvise() or munmap() can never run inside the critical section,
 * whatever a release hook does.
 */
#include <errno.h>
#include <pthread.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#define EXPORT __attribute__((visibility("default")))

/*
 * What a covering lookup reads comes first, and each node caches its left
 * subtree's largest bound: deciding whether to go left costs no visit to
 * the left child, which at 100 k nodes is a cache miss per level.
 */
typedef struct node {
    uint64_t base, bound, left_max;
    struct node *left, *right;
    uint64_t max_bound, key;
} node_t; /* 56 bytes: one 64-byte malloc chunk (a stored priority would take 80) */

typedef struct itree {
    pthread_mutex_t lock;
    node_t *root;
    size_t size;
    uint64_t salt;
} itree_t;

/*
 * A node's treap priority, computed rather than stored: a hash of its
 * identity (base, key) salted per tree with random bits, so that no choice
 * of ranges can unbalance the tree without knowing the salt.
 */
static inline uint64_t priority(const node_t *n, uint64_t salt)
{
    uint64_t x = (n->base ^ salt) + n->key * 0x9E3779B97F4A7C15ULL;
    x ^= x >> 30;
    x *= 0xBF58476D1CE4E5B9ULL;
    x ^= x >> 27;
    x *= 0x94D049BB133111EBULL;
    return x ^ (x >> 31);
}

static inline uint64_t max_of(node_t *n)
{
    return n ? n->max_bound : 0;
}

static inline void update(node_t *n)
{
    uint64_t m = n->bound;
    n->left_max = max_of(n->left);
    if (n->left_max > m)
        m = n->left_max;
    if (max_of(n->right) > m)
        m = max_of(n->right);
    n->max_bound = m;
}

static inline int before(uint64_t base, uint64_t key, const node_t *n)
{
    return base < n->base || (base == n->base && key < n->key);
}

static node_t *rotate_right(node_t *n)
{
    node_t *l = n->left;
    n->left = l->right;
    l->right = n;
    update(n);
    update(l);
    return l;
}

static node_t *rotate_left(node_t *n)
{
    node_t *r = n->right;
    n->right = r->left;
    r->left = n;
    update(n);
    update(r);
    return r;
}

static node_t *insert_node(node_t *n, node_t *fresh, uint64_t salt, int *duplicate)
{
    if (n == NULL)
        return fresh;
    if (fresh->base == n->base && fresh->key == n->key) {
        *duplicate = 1;
        return n;
    }
    if (before(fresh->base, fresh->key, n)) {
        n->left = insert_node(n->left, fresh, salt, duplicate);
        if (priority(n->left, salt) > priority(n, salt))
            return rotate_right(n);
    } else {
        n->right = insert_node(n->right, fresh, salt, duplicate);
        if (priority(n->right, salt) > priority(n, salt))
            return rotate_left(n);
    }
    update(n);
    return n;
}

static node_t *merge(node_t *a, node_t *b, uint64_t salt)
{
    /* every key of a is before every key of b */
    if (a == NULL)
        return b;
    if (b == NULL)
        return a;
    if (priority(a, salt) > priority(b, salt)) {
        a->right = merge(a->right, b, salt);
        update(a);
        return a;
    }
    b->left = merge(a, b->left, salt);
    update(b);
    return b;
}

static node_t *remove_node(node_t *n, uint64_t base, uint64_t key, uint64_t salt,
                           node_t **removed)
{
    if (n == NULL)
        return NULL;
    if (n->base == base && n->key == key) {
        *removed = n;
        return merge(n->left, n->right, salt);
    }
    if (before(base, key, n))
        n->left = remove_node(n->left, base, key, salt, removed);
    else
        n->right = remove_node(n->right, base, key, salt, removed);
    update(n);
    return n;
}

/* Some node of a subtree whose max_bound >= hi with bound >= hi: one path down. */
static node_t *any_reaching(node_t *n, uint64_t hi)
{
    for (;;) {
        if (n->bound >= hi)
            return n;
        n = (n->left != NULL && n->left_max >= hi) ? n->left : n->right;
    }
}

/*
 * An interval containing [lo, hi): base <= lo and bound >= hi.  One path:
 * right of a node whose base exceeds lo nothing qualifies; left of a node
 * whose base is <= lo every base is <= lo, so any bound reaching hi there
 * qualifies and max_bound leads straight to one.  O(height).
 */
static node_t *find_covering(node_t *n, uint64_t lo, uint64_t hi)
{
    while (n != NULL) {
        if (n->base > lo) {
            n = n->left;
            continue;
        }
        if (n->bound >= hi)
            return n;
        if (n->left != NULL && n->left_max >= hi)
            return any_reaching(n->left, hi);
        n = n->right;
    }
    return NULL;
}

/* Calls emit() for each interval overlapping [lo, hi), in base order. */
typedef struct {
    uint64_t *keys;
    size_t max, count;
} collect_t;

static void overlapping(node_t *n, uint64_t lo, uint64_t hi, collect_t *out)
{
    while (n != NULL && n->max_bound > lo) {
        if (n->left_max > lo)
            overlapping(n->left, lo, hi, out);
        if (n->base >= hi)
            return;
        if (n->bound > lo) {
            if (out->count < out->max)
                out->keys[out->count] = n->key;
            out->count++;
        }
        n = n->right;
    }
}

static void free_all(node_t *n)
{
    while (n != NULL) {
        node_t *right = n->right;
        free_all(n->left);
        free(n);
        n = right;
    }
}

EXPORT itree_t *pmca_itree_create(uint64_t seed)
{
    itree_t *t = calloc(1, sizeof(*t));
    if (t == NULL)
        return NULL;
    pthread_mutex_init(&t->lock, NULL);
    t->salt = seed;
    return t;
}

EXPORT void pmca_itree_destroy(itree_t *t)
{
    if (t == NULL)
        return;
    free_all(t->root);
    pthread_mutex_destroy(&t->lock);
    free(t);
}

/* 0, -ENOMEM (nothing changed) or -EEXIST (same base and key already there). */
EXPORT int pmca_itree_insert(itree_t *t, uint64_t base, uint64_t bound, uint64_t key)
{
    node_t *fresh = malloc(sizeof(*fresh)); /* before the lock: see the file comment */
    int duplicate = 0;
    if (fresh == NULL)
        return -ENOMEM;
    fresh->base = base;
    fresh->bound = bound;
    fresh->key = key;
    fresh->max_bound = bound;
    fresh->left_max = 0;
    fresh->left = fresh->right = NULL;
    pthread_mutex_lock(&t->lock);
    t->root = insert_node(t->root, fresh, t->salt, &duplicate);
    if (!duplicate)
        t->size++;
    pthread_mutex_unlock(&t->lock);
    if (duplicate) {
        free(fresh);
        return -EEXIST;
    }
    return 0;
}

/* 0 or -ENOENT. */
EXPORT int pmca_itree_remove(itree_t *t, uint64_t base, uint64_t key)
{
    node_t *removed = NULL;
    pthread_mutex_lock(&t->lock);
    t->root = remove_node(t->root, base, key, t->salt, &removed);
    if (removed != NULL)
        t->size--;
    pthread_mutex_unlock(&t->lock);
    if (removed == NULL)
        return -ENOENT;
    free(removed); /* after the lock */
    return 0;
}

/*
 * The key of an interval containing [lo, hi), or -1 (keys are below 2**63).
 * The bounds are addresses and typed so: ctypes converts a Python int to a
 * pointer argument in a third of the time it takes for a uint64_t.
 */
EXPORT int64_t pmca_itree_find_covering(itree_t *t, uintptr_t lo, uintptr_t hi)
{
    pthread_mutex_lock(&t->lock);
    node_t *n = find_covering(t->root, lo, hi);
    int64_t key = n != NULL ? (int64_t)n->key : -1;
    pthread_mutex_unlock(&t->lock);
    return key;
}

/*
 * How many intervals overlap [lo, hi); the first `max` of their keys (in
 * base order) go to keys[].  A caller that gets more than `max` asks again
 * with a larger array.
 */
EXPORT size_t pmca_itree_overlapping(itree_t *t, uint64_t lo, uint64_t hi, uint64_t *keys,
                                     size_t max)
{
    collect_t out = {keys, max, 0};
    pthread_mutex_lock(&t->lock);
    overlapping(t->root, lo, hi, &out);
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

/* Empties the tree; the nodes are freed after the lock is dropped. */
EXPORT void pmca_itree_clear(itree_t *t)
{
    pthread_mutex_lock(&t->lock);
    node_t *root = t->root;
    t->root = NULL;
    t->size = 0;
    pthread_mutex_unlock(&t->lock);
    free_all(root);
}
