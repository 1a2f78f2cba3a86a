/*
 * slurmd-ns-fallback: preloaded into slurmd in a pod that may not create namespaces (see the entrypoint).
 *
 * A batch job that asks for the user's login environment (sbatch --export=NONE, --export=VAR,... without
 * ALL, --get-user-env: SLURM_GET_USER_ENV=1) makes slurmd run `su - user -c env` in a child that it
 * clones into new PID and mount namespaces (env_array_user_default in src/common/env.c). Without
 * CAP_SYS_ADMIN, which Pod Security baseline does not grant, clone() fails and slurmd exits with
 * "fatal: clone: Operation not permitted": the container restarts and every job on the node ends.
 *
 * Slurm forks instead when /proc/sys/user/max_pid_namespaces or max_mnt_namespaces reads 0 (its
 * _ns_disabled(), read once with fopen). A pod cannot write those files, so this library answers "0" to
 * slurmd's fopen of them and passes every other call to libc. Nothing else changes: slurmd logs Slurm's
 * own warning for that path, and what the user's login scripts leave running stays in this container.
 *
 * LD_PRELOAD stays in slurmd's environment on purpose: slurmd re-executes itself on a reconfigure with
 * that environment. Neither the `su` child (a fresh environment) nor a job's tasks (the job's
 * environment) receive it.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdio.h>
#include <string.h>

typedef FILE *(*fopen_fn)(const char *, const char *);

static const char zero_namespaces[] = "0\n";

/* libc's function, looked up at the first call: another library's constructor may open a file before ours
 * would run (a race between threads only stores the same address twice) */
static fopen_fn libc(fopen_fn *cached, const char *name)
{
	if (!*cached)
		*cached = (fopen_fn) dlsym(RTLD_NEXT, name);
	return *cached;
}

static int is_namespace_limit(const char *path)
{
	return path && (!strcmp(path, "/proc/sys/user/max_pid_namespaces") ||
			!strcmp(path, "/proc/sys/user/max_mnt_namespaces"));
}

/* a read-only stream of "0\n" (fmemopen does not write to the buffer in mode "r") */
static FILE *zero_stream(void)
{
	return fmemopen((void *) zero_namespaces, sizeof(zero_namespaces) - 1, "r");
}

FILE *fopen(const char *path, const char *mode)
{
	static fopen_fn libc_fopen;

	if (is_namespace_limit(path) && mode && mode[0] == 'r')
		return zero_stream();
	return libc(&libc_fopen, "fopen")(path, mode);
}

FILE *fopen64(const char *path, const char *mode)
{
	static fopen_fn libc_fopen64;

	if (is_namespace_limit(path) && mode && mode[0] == 'r')
		return zero_stream();
	return libc(&libc_fopen64, "fopen64")(path, mode);
}
