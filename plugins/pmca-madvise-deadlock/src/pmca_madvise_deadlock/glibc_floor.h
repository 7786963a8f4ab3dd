/*
 * Forced into the library (gcc -include) when it is built against glibc:
 * binds the functions glibc 2.34 moved into libc (their default version
 * became GLIBC_2.34) back to their original versions, which glibc keeps,
 * so a wheel built on a new glibc still loads on an old one.  The function
 * is renamed for the compiler and the new name bound for the assembler.
 */
#ifndef PMCA_MADVISE_GLIBC_FLOOR_H
#define PMCA_MADVISE_GLIBC_FLOOR_H

#if defined(__x86_64__)
#define FLOOR_VERSION "GLIBC_2.2.5"
#elif defined(__aarch64__)
#define FLOOR_VERSION "GLIBC_2.17"
#endif

#ifdef FLOOR_VERSION
#define FLOOR_BIND(name) __asm__(".symver floor_" #name "," #name "@" FLOOR_VERSION)
#define dlopen floor_dlopen
#define dlsym floor_dlsym
#define pthread_create floor_pthread_create
#define pthread_join floor_pthread_join
#define pthread_rwlock_rdlock floor_pthread_rwlock_rdlock
#define pthread_rwlock_wrlock floor_pthread_rwlock_wrlock
#define pthread_rwlock_unlock floor_pthread_rwlock_unlock
FLOOR_BIND(dlopen);
FLOOR_BIND(dlsym);
FLOOR_BIND(pthread_create);
FLOOR_BIND(pthread_join);
FLOOR_BIND(pthread_rwlock_rdlock);
FLOOR_BIND(pthread_rwlock_wrlock);
FLOOR_BIND(pthread_rwlock_unlock);
#endif

#endif
