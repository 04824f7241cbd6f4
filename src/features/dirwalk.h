/* dirwalk.h: mrubyDirectoryWalk Off, sections whose requests are not
 * mapped to the file system (as mod_proxy's URLs are not). */
#ifndef MM_DIRWALK_H
#define MM_DIRWALK_H

#include "httpd.h"

/* A section turned the walk off: its hooks run in this configuration's
 * generation (registered once per generation). */
void mm_dirwalk_use(void);
/* A new configuration generation begins (pre_config). */
void mm_dirwalk_pre_config(void);

#endif
