/* SPDX-License-Identifier: MIT */
/* The rules for project and branch names (SPEC 4). */
#ifndef LFS_NAMES_H
#define LFS_NAMES_H

#include "layerfs.h"

int lfs_check_project_name(const char *name, lfs_error **err);
int lfs_check_branch_name(const char *name, lfs_error **err);

#endif
