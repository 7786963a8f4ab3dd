/*
 * Forced into every native library of pmca and of its bundled plugins (gcc
 * -include, see native_build.py): binds the few libc functions whose default
 * symbol version moved when glibc 2.34 merged libdl and libpthread into libc,
 * and that these libraries call, back to their original versions.
 *
 * Built against glibc >= 2.34, a plain call to dlopen references
 * dlopen@GLIBC_2.34, and the library then refuses to load on any older
 * glibc although nothing in it needs 2.34.  glibc keeps the original
 * versions as compatibility symbols, so a reference bound to them loads on
 * old and new glibc alike (on old glibc they live in libdl/libpthread, which
 * a Python interpreter built there has loaded already).  The remaining
 * floor is clock_gettime@GLIBC_2.17, hence the wheel's manylinux_2_17 tag.
 *
 * The function is renamed for the compiler and the new name bound to the
 * old version for the assembler: a plain ".symver dlopen,dlopen@..." is
 * ignored when the declaration follows it, and this header comes first.
 */
#ifndef PMCA_GLIBC_FLOOR_H
#define PMCA_GLIBC_FLOOR_H

/* setup.py forces this header in only when it builds against glibc. */
#if defined(__x86_64__)
#define PMCA_GLIBC_BASE "GLIBC_2.2.5"
#define PMCA_GLIBC_DLADDR1 "GLIBC_2.3.3"
#elif defined(__aarch64__)
#define PMCA_GLIBC_BASE "GLIBC_2.17"
#define PMCA_GLIBC_DLADDR1 "GLIBC_2.17"
#endif

#ifdef PMCA_GLIBC_BASE
#define PMCA_GLIBC_BIND(name, version) \
    __asm__(".symver pmca_glibc_floor_" #name "," #name "@" version)

#define dlopen pmca_glibc_floor_dlopen
#define dlsym pmca_glibc_floor_dlsym
#define dlclose pmca_glibc_floor_dlclose
#define dlerror pmca_glibc_floor_dlerror
#define dladdr pmca_glibc_floor_dladdr
#define dladdr1 pmca_glibc_floor_dladdr1
#define pthread_once pmca_glibc_floor_pthread_once
#define pthread_create pmca_glibc_floor_pthread_create
#define pthread_join pmca_glibc_floor_pthread_join
#define pthread_rwlock_rdlock pmca_glibc_floor_pthread_rwlock_rdlock
#define pthread_rwlock_wrlock pmca_glibc_floor_pthread_rwlock_wrlock
#define pthread_rwlock_unlock pmca_glibc_floor_pthread_rwlock_unlock
PMCA_GLIBC_BIND(dlopen, PMCA_GLIBC_BASE);
PMCA_GLIBC_BIND(dlsym, PMCA_GLIBC_BASE);
PMCA_GLIBC_BIND(dlclose, PMCA_GLIBC_BASE);
PMCA_GLIBC_BIND(dlerror, PMCA_GLIBC_BASE);
PMCA_GLIBC_BIND(dladdr, PMCA_GLIBC_BASE);
PMCA_GLIBC_BIND(dladdr1, PMCA_GLIBC_DLADDR1);
PMCA_GLIBC_BIND(pthread_once, PMCA_GLIBC_BASE);
PMCA_GLIBC_BIND(pthread_create, PMCA_GLIBC_BASE);
PMCA_GLIBC_BIND(pthread_join, PMCA_GLIBC_BASE);
PMCA_GLIBC_BIND(pthread_rwlock_rdlock, PMCA_GLIBC_BASE);
PMCA_GLIBC_BIND(pthread_rwlock_wrlock, PMCA_GLIBC_BASE);
PMCA_GLIBC_BIND(pthread_rwlock_unlock, PMCA_GLIBC_BASE);
#endif

#endif
