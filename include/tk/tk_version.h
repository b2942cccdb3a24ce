/* The library's version: the one place it is written. CMakeLists.txt reads
 * these three lines for project(VERSION), the shared library's SONAME and
 * version, tilekittens.pc and TileKittensConfigVersion.cmake. docs/API.md
 * says what each part's change means for the ABI. */
#ifndef TK_TK_VERSION_H
#define TK_TK_VERSION_H

#include "tk/tk_export.h"

#define TK_VERSION_MAJOR 0
#define TK_VERSION_MINOR 2
#define TK_VERSION_PATCH 0

/* MAJOR * 10000 + MINOR * 100 + PATCH, for #if comparisons. */
#define TK_VERSION_NUMBER (TK_VERSION_MAJOR * 10000 + TK_VERSION_MINOR * 100 + TK_VERSION_PATCH)

#ifdef __cplusplus
extern "C" {
#endif

/* The version of the library loaded at run time, "MAJOR.MINOR.PATCH" (a
 * program built against other headers can compare with TK_VERSION_*). */
TK_API const char *tk_version(void);
/* The same as a number, in TK_VERSION_NUMBER's form. */
TK_API int tk_version_number(void);

#ifdef __cplusplus
}
#endif
#endif
