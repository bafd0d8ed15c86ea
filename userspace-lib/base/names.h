/* SPDX-License-Identifier: MIT */
/* The rules for project and branch names (SPEC 4). */
#ifndef LFS_NAMES_H
#define LFS_NAMES_H

#include "layerfs.h"

int lfs_check_project_name(const char *name, lfs_error **err);
int lfs_check_branch_name(const char *name, lfs_error **err);
/* A checked branch as one directory name (its Workspace's mount point and upper
 * directory in a Sandbox): "feature/x" -> "feature%2Fx", '%' -> "%25"; a name longer
 * than NAME_MAX ends in "%~" and 32 hex digits of the branch's SHA-256. */
char *lfs_branch_dir_name(const char *branch);

#endif
