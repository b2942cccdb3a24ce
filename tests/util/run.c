#include "util/run.h"

#include <stdlib.h>

int run_suite(Suite *s) {
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}

TCase *tu_tcase(Suite *s, const char *name, int timeout) {
    TCase *tc = tcase_create(name);
    if (timeout) tcase_set_timeout(tc, timeout);
    suite_add_tcase(s, tc);
    return tc;
}
