/* tk_version(): the version the library was built as (include/tk/tk_version.h). */
#include "tk/tk.h"

#define TK_STR2(x) #x
#define TK_STR(x)  TK_STR2(x)

const char *tk_version(void) {
    return TK_STR(TK_VERSION_MAJOR) "." TK_STR(TK_VERSION_MINOR) "." TK_STR(TK_VERSION_PATCH);
}

int tk_version_number(void) { return TK_VERSION_NUMBER; }
