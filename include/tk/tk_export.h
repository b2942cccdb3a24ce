/* TK_API marks the library's public functions. The library is compiled with
 * hidden visibility (-fvisibility=hidden), so only what carries TK_API is
 * exported from libtilekittens.so: the ABI is exactly what include/tk/
 * declares (scripts/check-exports.sh holds both directions). Every public
 * header includes this one. */
#ifndef TK_TK_EXPORT_H
#define TK_TK_EXPORT_H

#if defined(__GNUC__) || defined(__clang__)
#define TK_API __attribute__((visibility("default")))
#else
#define TK_API
#endif

#endif
