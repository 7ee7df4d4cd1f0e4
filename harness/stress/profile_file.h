/* profile_file.h: internal to the stress-profile loader: its key table and the snapshot histogram its
 * `sizes` check loads. */
#ifndef OOMLAB_STRESS_PROFILE_FILE_H
#define OOMLAB_STRESS_PROFILE_FILE_H

#include "scenario/keytable.h"
#include "stress/profile.h"

extern const struct key_table stress_profile_table; /* profile_keys.c */

/* Loads s->from_snapshot (relative to the profile, c->root) into s's histogram; errors at `at`. */
int stress_sizes_load_snapshot(const struct key_ctx *c, yaml_node_t *at, struct size_spec *s, struct err *e);

/* `rel` relative to the directory of the file at `base` (absolute paths kept). */
void stress_relative_path(const char *base, const char *rel, char *out, size_t len);

#endif
