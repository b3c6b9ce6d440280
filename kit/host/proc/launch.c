/* mkb launch: what the kit sets up around a host command, in one exec (kit/host/proc/launch.py compiles it and
 * builds its command line; docs/untrusted.md gives the measured reasons).
 *
 *   launch [--cgroup=FILE] [--core=N] [--as=N] [--cpu=SOFT:HARD] [--fsize=N] [--nofile=N] [--nproc=N]
 *          [--parent=PID] [--cpus=LIST] [--subreaper] -- PROGRAM [ARG...]
 *
 * In this order, each before the next: writes its pid to FILE (a pids cgroup's cgroup.procs: the process joins
 * the group, and so does everything it starts); sets the rlimits (a single N sets soft and hard, as util-linux
 * prlimit); with --parent, asks for SIGKILL when its parent dies and exits 137 when the parent is no longer PID
 * (it died before that took effect); pins itself to the CPU LIST ("0,2-3"); then execs PROGRAM (looked up on
 * PATH) with the same pid.  With --subreaper it instead becomes its descendants' child subreaper, runs PROGRAM
 * as its child (SIGKILL when the launcher dies, the same check), waits for every process of the tree, orphans
 * included, and exits as PROGRAM did: its exit status, 128 + N when signal N killed it.  Why: the kit reads a
 * command's CPU time from wait4's rusage of its direct child, which holds only the descendants that were waited
 * for, and bubblewrap's outer process leaves without waiting for the sandbox's init.
 *
 * Exit status of its own failures: 126 (a bad option, a limit or the cgroup that could not be set, a fork that
 * failed), 127 (PROGRAM not found), 126 (PROGRAM found but not executable), with a line on stderr.
 * Standard C and Linux system calls only. */

#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#define FAIL 126

static void die(const char *what, const char *arg) {
    fprintf(stderr, "mkb launch: %s%s%s: %s\n", what, arg ? " " : "", arg ? arg : "", strerror(errno));
    _exit(FAIL);
}

static void usage(const char *arg) {
    fprintf(stderr, "mkb launch: bad option %s\n", arg);
    _exit(FAIL);
}

/* A decimal number that fills all of s (no sign), or usage(). */
static unsigned long long number(const char *s, const char *arg) {
    char *end;
    errno = 0;
    if (*s < '0' || *s > '9')
        usage(arg);
    unsigned long long v = strtoull(s, &end, 10);
    if (errno || *end)
        usage(arg);
    return v;
}

static void set_limit(int resource, const char *value, const char *arg) {
    struct rlimit r;
    const char *colon = strchr(value, ':');
    if (colon) {
        char soft[32];
        size_t n = (size_t)(colon - value);
        if (n == 0 || n >= sizeof soft)
            usage(arg);
        memcpy(soft, value, n);
        soft[n] = 0;
        r.rlim_cur = number(soft, arg);
        r.rlim_max = number(colon + 1, arg);
    } else {
        r.rlim_cur = r.rlim_max = number(value, arg);
    }
    if (setrlimit(resource, &r) != 0)
        die("cannot set", arg);
}

static void join_cgroup(const char *file) {
    char pid[32];
    int n = snprintf(pid, sizeof pid, "%d\n", (int)getpid());
    int fd = open(file, O_WRONLY | O_CLOEXEC);
    if (fd < 0 || write(fd, pid, (size_t)n) != n)
        die("cannot join the pids cgroup", file);
    close(fd);
}

/* One range of a CPU list, "2" or "2-3", into lo and hi, or usage(). */
static void cpu_range(char *tok, unsigned long *lo, unsigned long *hi, const char *arg) {
    char *dash = strchr(tok, '-');
    if (dash)
        *dash = 0;
    *lo = number(tok, arg);
    *hi = dash ? number(dash + 1, arg) : *lo;
    if (dash)
        *dash = '-';
    if (*hi < *lo || *hi >= 1 << 20)
        usage(arg);
}

/* "0,2-3" onto this process's CPU affinity (two passes: the highest CPU named sizes the set). */
static void pin(const char *list) {
    char *copy = strdup(list), *save = NULL;
    unsigned long lo, hi, top = 0;
    if (!copy)
        die("cannot allocate a CPU set", NULL);
    for (char *tok = strtok_r(copy, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
        cpu_range(tok, &lo, &hi, list);
        top = hi > top ? hi : top;
    }
    cpu_set_t *set = CPU_ALLOC(top + 1);
    size_t size = CPU_ALLOC_SIZE(top + 1);
    if (!set)
        die("cannot allocate a CPU set", NULL);
    CPU_ZERO_S(size, set);
    strcpy(copy, list);
    for (char *tok = strtok_r(copy, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
        cpu_range(tok, &lo, &hi, list);
        for (unsigned long c = lo; c <= hi; c++)
            CPU_SET_S(c, size, set);
    }
    if (CPU_COUNT_S(size, set) == 0)
        usage(list);
    if (sched_setaffinity(0, size, set) != 0)
        die("cannot set the CPU affinity", list);
    CPU_FREE(set);
    free(copy);
}

/* SIGKILL when the parent dies; 137 at once when it is no longer `parent` (it died before prctl took effect). */
static void die_with_parent(pid_t parent) {
    if (prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0) != 0)
        die("cannot set the parent-death signal", NULL);
    if (getppid() != parent)
        _exit(137);
}

static void run(char **argv) {
    execvp(argv[0], argv);
    int err = errno;
    fprintf(stderr, "mkb launch: cannot execute %s: %s\n", argv[0], strerror(err));
    _exit(err == ENOENT || err == ENOTDIR ? 127 : 126);
}

/* Run argv as a child, wait for it and every orphan of its tree; its exit status (128 + N for signal N). */
static int reap(char **argv) {
    if (prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) != 0)
        die("cannot become a subreaper", NULL);
    pid_t self = getpid();
    pid_t child = fork();
    if (child < 0)
        die("cannot fork", NULL);
    if (child == 0) {
        die_with_parent(self);
        run(argv);
    }
    int status = 127;
    for (;;) {
        int st;
        pid_t pid = waitpid(-1, &st, 0);
        if (pid < 0) {
            if (errno == EINTR)
                continue;
            return status;  /* ECHILD: the whole tree is gone */
        }
        if (pid == child)
            status = WIFSIGNALED(st) ? 128 + WTERMSIG(st) : WEXITSTATUS(st);
    }
}

static const struct {
    const char *name;
    int resource;
} LIMITS[] = {
    {"--core=", RLIMIT_CORE}, {"--as=", RLIMIT_AS}, {"--cpu=", RLIMIT_CPU},
    {"--fsize=", RLIMIT_FSIZE}, {"--nofile=", RLIMIT_NOFILE}, {"--nproc=", RLIMIT_NPROC},
};

int main(int argc, char **argv) {
    const char *cgroup = NULL, *cpus = NULL;
    pid_t parent = 0;
    int subreaper = 0, i = 1;
    for (; i < argc && strcmp(argv[i], "--") != 0; i++)
        if (strncmp(argv[i], "--cgroup=", 9) == 0)
            cgroup = argv[i] + 9;
        else if (strncmp(argv[i], "--cpus=", 7) == 0)
            cpus = argv[i] + 7;
        else if (strncmp(argv[i], "--parent=", 9) == 0)
            parent = (pid_t)number(argv[i] + 9, argv[i]);
        else if (strcmp(argv[i], "--subreaper") == 0)
            subreaper = 1;
        else {
            size_t k = 0, n = sizeof LIMITS / sizeof LIMITS[0];
            while (k < n && strncmp(argv[i], LIMITS[k].name, strlen(LIMITS[k].name)) != 0)
                k++;
            if (k == n)
                usage(argv[i]);
        }
    if (i + 1 >= argc)
        usage("(no program after --)");
    /* the cgroup first, so that nothing of the command runs outside it; then the limits, the signal, the pin */
    if (cgroup)
        join_cgroup(cgroup);
    for (int j = 1; j < i; j++)
        for (size_t k = 0; k < sizeof LIMITS / sizeof LIMITS[0]; k++)
            if (strncmp(argv[j], LIMITS[k].name, strlen(LIMITS[k].name)) == 0)
                set_limit(LIMITS[k].resource, argv[j] + strlen(LIMITS[k].name), argv[j]);
    if (parent)
        die_with_parent(parent);
    if (cpus)
        pin(cpus);
    if (subreaper)
        _exit(reap(argv + i + 1));
    run(argv + i + 1);
    return FAIL;
}
