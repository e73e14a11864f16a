// zinc/util/check.h — internal invariant checks. A failed check is a bug in zinc, not bad user
// input: it prints file and line and aborts. Never use it on values that come from a user.
#pragma once

#include <cstdio>
#include <cstdlib>

#define ZINC_CHECK(cond)                                                                   \
    do {                                                                                   \
        if (!(cond)) {                                                                     \
            std::fprintf(stderr, "zinc: internal check failed: %s at %s:%d\n", #cond,      \
                         __FILE__, __LINE__);                                              \
            std::abort();                                                                  \
        }                                                                                  \
    } while (0)
