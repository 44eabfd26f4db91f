/*
 * agentd-agent: the in-container process runner of every agentd sandbox (PROTOCOL.md).
 *
 * The container's main process (under Docker's init), as root with only CAP_SETUID and
 * CAP_SETGID. It reads frames from agentd on its stdin (the container's attached stdin)
 * and writes frames to its stdout: tool processes start here, by fork and exec, without
 * the Docker engine. Every process it starts drops to the sandbox user (uid/gid 1000, no
 * supplementary groups, no capabilities) before anything of the call runs, leads a process
 * group of its own and gets fresh pipes for stdin, stdout and stderr: sandbox code never
 * holds the agent's stdin or stdout, and cannot signal, trace or open the files of a
 * process of another uid, so it cannot forge a frame, kill or stop the agent.
 *
 * Timeouts are enforced here too (the whole process group is killed at the deadline, even
 * when agentd is gone), output is capped, and when a call ends with no other call running
 * every process of the sandbox user is killed: nothing a call started outlives it — by
 * the agent that owns the container (the newest: see claim_container), never by an old
 * owner's agent, whose worker lost the run while a new owner's calls run.
 *
 * Must never: run anything of a call as root, read a file or follow a path on behalf of
 * a call (the child does that after dropping to uid 1000), block on a pipe the sandbox
 * controls, or hold more than a few MB however much the sandbox prints.
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <grp.h>
#include <poll.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/random.h>
#include <sys/signalfd.h>
#include <sys/stat.h>
#include <sys/fsuid.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define SANDBOX_UID 1000
#define SANDBOX_GID 1000
#define MAX_CALLS 64
#define HDR 9
#define MAX_FRAME (1u << 20)      /* largest payload agentd may send */
#define OUT_CHUNK (64 * 1024)     /* largest output payload sent */
#define OUTQ_HIGH (2u << 20)      /* stop reading call output above this much queued */
#define STDIN_WINDOW (256 * 1024) /* stdin bytes agentd may send a call before credit */
#define DRAIN_MS 200              /* after a call's leader ended: how long its pipes may stay open */
#define HOME_ROOT "/tmp/.agentd-home"
#define OWNER_DIR "/tmp/.agentd-root" /* root's, 0700: which agent owns the container */

enum { F_TIMEOUT = 1, F_CAPPED = 2, F_FAILED = 4, F_KILLED = 8, F_CLEAN = 16 };
enum { S_STDIN = 1, S_CONFINE = 2, S_PRIVATE = 4, S_HOMES = 8 };

struct call {
  int used;
  uint32_t id;
  pid_t pid;            /* leader; 0 once reaped */
  int out, err, in;     /* our ends; -1 when closed */
  int status;           /* exit status, shell style */
  uint8_t flags;
  int64_t deadline;     /* ms, 0 = none */
  int64_t drain_until;  /* ms, set when the leader ended */
  uint64_t max_out, sent;
  unsigned char *pend;  /* stdin bytes received, not yet written (at most STDIN_WINDOW) */
  size_t pend_len, pend_off, pend_cap;
  int in_eof;           /* close stdin once pend is written */
  char home[64];
};

static struct call calls[MAX_CALLS];
static unsigned char *inbuf;
static size_t in_len;
static int in_open = 1;
static unsigned char *outq;
static size_t oq_len, oq_off, oq_cap;
static int out_open = 1;
static int exit_on_eof;      /* a second agent (docker exec): it goes when its pipe closes */
static int owner_dir = -1;   /* OWNER_DIR, once found root's and closed to others */
static char **base_env;

static int64_t now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void die(const char *what) {
  dprintf(2, "agentd-agent: %s: %s\n", what, strerror(errno));
  exit(111);
}

static void put32(unsigned char *p, uint32_t v) {
  p[0] = v >> 24; p[1] = v >> 16; p[2] = v >> 8; p[3] = v;
}
static uint32_t get32(const unsigned char *p) {
  return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

/* ---------------------------------------------------------------- output queue */

static void oq_reserve(size_t n) {
  if (oq_off > 0 && oq_off == oq_len) oq_off = oq_len = 0;
  if (oq_len + n <= oq_cap) return;
  if (oq_off > 0) {
    memmove(outq, outq + oq_off, oq_len - oq_off);
    oq_len -= oq_off;
    oq_off = 0;
    if (oq_len + n <= oq_cap) return;
  }
  size_t cap = oq_cap ? oq_cap : 65536;
  while (cap < oq_len + n) cap *= 2;
  unsigned char *q = realloc(outq, cap);
  if (!q) die("out of memory");
  outq = q;
  oq_cap = cap;
}

static void send_frame(char type, uint32_t id, const void *data, size_t len) {
  if (!out_open) return;
  oq_reserve(HDR + len);
  unsigned char *p = outq + oq_len;
  p[0] = (unsigned char)type;
  put32(p + 1, id);
  put32(p + 5, (uint32_t)len);
  if (len) memcpy(p + HDR, data, len);
  oq_len += HDR + len;
}

static size_t oq_pending(void) { return oq_len - oq_off; }

static void flush_out(void) {
  while (out_open && oq_pending() > 0) {
    ssize_t n = write(1, outq + oq_off, oq_pending());
    if (n > 0) { oq_off += (size_t)n; continue; }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && errno == EAGAIN) return;
    out_open = 0; /* agentd went away */
    oq_off = oq_len = 0;
  }
}

/* ---------------------------------------------------------------- killing */

/* Signals as the sandbox user: root without CAP_KILL cannot signal uid 1000 otherwise. */
static int kill_as_sandbox(pid_t target) {
  if (setresuid(-1, SANDBOX_UID, -1) != 0) return -1;
  int r = kill(target, SIGKILL);
  int e = errno;
  if (setresuid(-1, 0, -1) != 0) die("setresuid back to root");
  errno = e;
  return r;
}

/*
 * 1 when /proc/PID/status names a live (not zombie) process with the sandbox uid as its
 * real, effective or saved uid. The status file, not the owner of /proc/PID: a process
 * that made itself non-dumpable shows /proc/PID as root's.
 */
static int is_sandbox_proc(const char *pid) {
  char path[300], buf[2048];
  snprintf(path, sizeof path, "/proc/%s/status", pid);
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return 0;
  ssize_t r = read(fd, buf, sizeof buf - 1);
  close(fd);
  if (r <= 0) return 0;
  buf[r] = 0;
  /* A zombie is done, unless it is a thread group leader whose other threads still run. */
  const char *st = strstr(buf, "\nState:\t");
  const char *th = strstr(buf, "\nThreads:\t");
  if (st && st[8] == 'Z' && (!th || atoi(th + 10) < 2)) return 0;
  const char *u = strstr(buf, "\nUid:\t");
  unsigned ru, eu, su;
  if (!u || sscanf(u + 6, "%u %u %u", &ru, &eu, &su) != 3) return 0;
  return ru == SANDBOX_UID || eu == SANDBOX_UID || su == SANDBOX_UID;
}

/* Live processes of the sandbox user in /proc: how many, each killed when `and_kill`. */
static int scan_sandbox_procs(int and_kill) {
  DIR *d = opendir("/proc");
  if (!d) return -1;
  int n = 0;
  struct dirent *e;
  while ((e = readdir(d)) != NULL) {
    if (e->d_name[0] < '0' || e->d_name[0] > '9') continue;
    if (!is_sandbox_proc(e->d_name)) continue;
    if (and_kill) kill_as_sandbox((pid_t)atoi(e->d_name));
    n++;
  }
  closedir(d);
  return n;
}

/*
 * One sweep: a child that is wholly the sandbox user sends SIGKILL to every process it may
 * signal — kill(-1) runs under the kernel's task list lock, so a process that keeps
 * forking and exiting to move ahead of a /proc scan cannot slip past it, and a fork racing
 * it fails — then exits. 0 when the sweep ran; -1 when the child could not (no pid left at
 * the pids limit, or a sandbox process killed it first).
 */
static int sweep(void) {
  pid_t p = fork();
  if (p < 0) return -1;
  if (p == 0) {
    closefrom(0);
    if (setgroups(0, NULL) || setresgid(SANDBOX_GID, SANDBOX_GID, SANDBOX_GID) ||
        setresuid(SANDBOX_UID, SANDBOX_UID, SANDBOX_UID))
      _exit(3);
    prctl(PR_SET_DUMPABLE, 0); /* whatever fs.suid_dumpable says: no sandbox ptrace */
    kill(-1, SIGKILL);
    _exit(0);
  }
  /* The helper is uid 1000: a sandbox process may stop it. Never wait on it for long. */
  int st;
  for (int i = 0; i < 100; i++) {
    pid_t r = waitpid(p, &st, WNOHANG);
    if (r == p) return WIFEXITED(st) && WEXITSTATUS(st) == 0 ? 0 : -1;
    if (r < 0 && errno != EINTR) return -1;
    usleep(100);
  }
  kill_as_sandbox(p);
  while (waitpid(p, &st, 0) < 0 && errno == EINTR) {}
  return -1;
}

static void reap(void);

/*
 * Every process of the sandbox user, until a sweep ran and a scan of /proc finds none left
 * (a process killed in the kernel's uninterruptible sleep dies when it leaves it). 0 when
 * clean. Where the sweep cannot run (a fork bomb at the pids limit), pid by pid from /proc
 * until it can. Never kill(-1) from the agent itself: with its real uid 0 that would reach
 * the container's root processes too (an operator's `docker exec -u 0` shell, an agent).
 */
static int kill_all(void) {
  int swept = 0;
  for (int round = 0; round < 2000; round++) {
    if (!swept) swept = sweep() == 0;
    if (!swept) scan_sandbox_procs(1);
    reap();
    if (swept && scan_sandbox_procs(0) == 0) return 0;
    if (round > 20) usleep(1000);
  }
  return -1;
}

/* ---------------------------------------------------------------- ownership */

/*
 * The newest agent owns the container: a worker that takes a run over starts a second
 * agent, while the first owner's agent may live on (its worker frozen, or slow to notice
 * its lost lease). Only the owner kills every process of the sandbox user on its own (a
 * call that ended alone, agentd gone) or on agentd's kill-all: an old owner's would cut
 * the new owner's calls short. The record is OWNER_DIR/owner, OWNER_REC bytes (the pid,
 * space-padded): the first agent makes it before any sandbox code runs, and each later
 * agent overwrites it in place (one pwrite into a page the file has: a /tmp the sandbox
 * filled cannot refuse it). OWNER_DIR must be root's and closed to others, else no agent
 * trusts it and each behaves as the only one (uid 1000 cannot make it root's). A later
 * agent that cannot claim exits (agentd then runs calls by docker exec).
 */
#define OWNER_REC 16

static void take_ownership(void);

static void claim_container(void) {
  mkdir(OWNER_DIR, 0700);
  int fd = open(OWNER_DIR, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  struct stat st;
  if (fd < 0 || fstat(fd, &st) != 0 || st.st_uid != 0 || (st.st_mode & 077) != 0) {
    if (fd >= 0) close(fd);
    if (exit_on_eof) die("the container's ownership record cannot be trusted");
    return;
  }
  owner_dir = fd;
  /* The first agent claims at once; a later one when it first acts (take_ownership). */
  if (!exit_on_eof) take_ownership();
}

/*
 * Writes this agent's pid into the record: at its first call or kill-all for a later agent
 * (one started only to read a mark, by a look at the container, takes nothing from the
 * agent of the drive that runs the run). A later agent that cannot claim exits.
 */
static void take_ownership(void) {
  static int claimed;
  if (claimed || owner_dir < 0) return;
  char rec[OWNER_REC + 1];
  snprintf(rec, sizeof rec, "%*d\n", OWNER_REC - 1, (int)getpid());
  int f = openat(owner_dir, "owner", O_WRONLY | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0600);
  int ok = f >= 0 && pwrite(f, rec, OWNER_REC, 0) == OWNER_REC;
  if (f >= 0) close(f);
  if (!ok && exit_on_eof) die("cannot claim the container");
  claimed = ok;
}

/* 1 when `pid` is a live agent: its comm is agentd-agent and its real uid root's. */
static int live_agent(int pid) {
  char path[64], buf[512];
  snprintf(path, sizeof path, "/proc/%d/status", pid);
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return 0;
  ssize_t r = read(fd, buf, sizeof buf - 1);
  close(fd);
  if (r <= 0) return 0;
  buf[r] = 0;
  const char *st = strstr(buf, "\nState:\t");
  const char *u = strstr(buf, "\nUid:\t");
  return strncmp(buf, "Name:\tagentd-agent\n", 19) == 0 && !(st && st[8] == 'Z') && u &&
         atoi(u + 6) == 0;
}

/*
 * 1 unless OWNER_DIR/owner names another live agent (a later one: it owns the container
 * now). An owner that is gone (a second agent that exited with its pipe) owns nothing:
 * every agent left behaves as the only one, as before any takeover.
 */
static int owns_container(void) {
  if (owner_dir < 0) return 1;
  int f = openat(owner_dir, "owner", O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
  if (f < 0) return 1;
  char buf[OWNER_REC + 1];
  ssize_t r = pread(f, buf, OWNER_REC, 0);
  close(f);
  if (r <= 0) return 1;
  buf[r] = 0;
  int owner = atoi(buf);
  return owner == (int)getpid() || !live_agent(owner);
}

/*
 * agentd's marks (the workspace filled, a recovery under way) in OWNER_DIR, where uid 1000
 * can neither make, remove nor see them. Payload: u8 op (0 set, 1 clear, 2 test), then the
 * name (lowercase letters, at most 32). Answer: 0 done (test: there), 1 test: not there,
 * 2 the directory is not trusted or the request is bad.
 */
static unsigned char mark(const unsigned char *p, uint32_t len) {
  struct stat dir;
  if (owner_dir < 0 || len < 2 || len > 33) return 2;
  /* Still root's alone (a fault may have opened it since): else no answer is trusted. */
  if (fstat(owner_dir, &dir) != 0 || dir.st_uid != 0 || (dir.st_mode & 077) != 0) return 2;
  char name[34];
  for (uint32_t i = 1; i < len; i++) {
    if (p[i] < 'a' || p[i] > 'z') return 2;
    name[i - 1] = (char)p[i];
  }
  name[len - 1] = 0;
  if (strcmp(name, "owner") == 0) return 2;
  if (p[0] == 0) {
    int f = openat(owner_dir, name, O_WRONLY | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0600);
    if (f < 0) return 2;
    close(f);
    return 0;
  }
  if (p[0] == 1) return unlinkat(owner_dir, name, 0) == 0 || errno == ENOENT ? 0 : 2;
  if (p[0] == 2) {
    struct stat st;
    if (fstatat(owner_dir, name, &st, AT_SYMLINK_NOFOLLOW) != 0) return errno == ENOENT ? 1 : 2;
    return S_ISREG(st.st_mode) ? 0 : 2;
  }
  return 2;
}

/* ---------------------------------------------------------------- calls */

static struct call *call_of(uint32_t id) {
  for (int i = 0; i < MAX_CALLS; i++)
    if (calls[i].used && calls[i].id == id) return &calls[i];
  return NULL;
}

static int active_calls(void) {
  int n = 0;
  for (int i = 0; i < MAX_CALLS; i++) if (calls[i].used && calls[i].pid > 0) n++;
  return n;
}

static void close_fd(int *fd) {
  if (*fd >= 0) close(*fd);
  *fd = -1;
}

static void send_credit(struct call *c, size_t n) {
  if (n == 0) return;
  unsigned char p[4];
  put32(p, (uint32_t)n);
  send_frame('C', c->id, p, 4);
}

/* Closes the call's stdin; what was received and not written is dropped, and credited. */
static void close_stdin(struct call *c) {
  close_fd(&c->in);
  send_credit(c, c->pend_len - c->pend_off);
  free(c->pend);
  c->pend = NULL;
  c->pend_len = c->pend_off = c->pend_cap = 0;
}

static void fail_start(uint32_t id, const char *msg) {
  unsigned char p[5];
  put32(p, (uint32_t)126);
  p[4] = F_FAILED;
  size_t ml = strlen(msg);
  unsigned char buf[5 + 512];
  if (ml > 512) ml = 512;
  memcpy(buf, p, 5);
  memcpy(buf + 5, msg, ml);
  send_frame('X', id, buf, 5 + ml);
}

static void remove_home(struct call *c);

/* The leader is gone and the pipes are closed: report, and remove HOME meanwhile. */
static void maybe_finish(struct call *c) {
  if (c->pid > 0 || c->out >= 0 || c->err >= 0) return;
  if (c->home[0]) remove_home(c);
  unsigned char p[5];
  put32(p, (uint32_t)c->status);
  p[4] = c->flags;
  send_frame('X', c->id, p, 5);
  close_stdin(c);
  memset(c, 0, sizeof *c);
  c->out = c->err = c->in = -1;
}

static int rm_entry(const char *path, const struct stat *st, int type, struct FTW *f) {
  (void)st; (void)f;
  if (type == FTW_DP || type == FTW_D) rmdir(path); else unlink(path);
  return 0;
}

/* HOME goes in a child of the sandbox user: a path the sandbox controls is never ours.
 * The call's result does not wait for it. */
static void remove_home(struct call *c) {
  pid_t p = fork();
  if (p == 0) {
    /* Nothing of the agent's: not its pipe to agentd, not other calls' pipe ends (a stopped
     * child holding a call's stdin would keep it from ever seeing EOF). */
    closefrom(0);
    if (setgroups(0, NULL) || setresgid(SANDBOX_GID, SANDBOX_GID, SANDBOX_GID) ||
        setresuid(SANDBOX_UID, SANDBOX_UID, SANDBOX_UID))
      _exit(1);
    prctl(PR_SET_DUMPABLE, 0);
    chmod(c->home, 0700);
    nftw(c->home, rm_entry, 16, FTW_DEPTH | FTW_PHYS | FTW_MOUNT);
    _exit(0);
  }
  (void)p; /* reaped with the others; a later call's kill-all may cut it short (harmless) */
  c->home[0] = 0;
}

/* The leader ended: kill what is left of its group, and of everything when it was alone. */
static void leader_ended(struct call *c, int status) {
  c->status = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  kill_as_sandbox(-c->pid);
  c->pid = 0;
  if (active_calls() == 0 && owns_container() && kill_all() == 0) c->flags |= F_CLEAN;
  c->drain_until = now_ms() + DRAIN_MS;
}

static void reap(void) {
  for (;;) {
    int status;
    pid_t p = waitpid(-1, &status, WNOHANG);
    if (p <= 0) return;
    for (int i = 0; i < MAX_CALLS; i++) {
      struct call *c = &calls[i];
      if (!c->used) continue;
      if (c->pid != p) continue;
      leader_ended(c, status);
      maybe_finish(c);
      break;
    }
  }
}

static void kill_call(struct call *c, uint8_t why) {
  c->flags |= why;
  if (c->pid > 0) kill_as_sandbox(-c->pid);
}

/* Call output: forwarded as it comes, up to max_out (+1 byte, so agentd sees the overflow). */
static void pump(struct call *c, int *fd, char type) {
  unsigned char buf[OUT_CHUNK];
  ssize_t n = read(*fd, buf, sizeof buf);
  if (n < 0 && (errno == EAGAIN || errno == EINTR)) return;
  if (n <= 0) { close_fd(fd); maybe_finish(c); return; }
  uint64_t room = c->max_out + 1 > c->sent ? c->max_out + 1 - c->sent : 0;
  size_t fwd = (uint64_t)n < room ? (size_t)n : (size_t)room;
  if (fwd) send_frame(type, c->id, buf, fwd);
  c->sent += fwd;
  if ((size_t)n > fwd) kill_call(c, F_CAPPED);
}

static char **call_env(const unsigned char **envs, int envc, const char *home) {
  int n = 0;
  while (base_env[n]) n++;
  char **env = calloc((size_t)(n + envc + 5), sizeof *env);
  if (!env) return NULL;
  int k = 0;
  static const char *own[] = {"HOME=", "XDG_CONFIG_HOME=", "XDG_CACHE_HOME=", "GIT_CONFIG_NOSYSTEM="};
  for (int i = 0; i < n; i++) {
    const char *kv = base_env[i];
    const char *eq = strchr(kv, '=');
    size_t kl = eq ? (size_t)(eq - kv) + 1 : strlen(kv);
    int shadowed = 0;
    for (int j = 0; j < envc && !shadowed; j++)
      shadowed = strncmp((const char *)envs[j], kv, kl) == 0;
    for (int j = 0; j < 4 && !shadowed; j++) shadowed = strncmp(own[j], kv, kl) == 0;
    if (!shadowed) env[k++] = (char *)kv;
  }
  for (int j = 0; j < envc; j++) {
    const char *kv = (const char *)envs[j];
    int own_key = 0;
    for (int o = 0; o < 4; o++) own_key |= strncmp(own[o], kv, strlen(own[o])) == 0;
    if (!own_key) env[k++] = (char *)kv;
  }
  if (asprintf(&env[k++], "HOME=%s", home) < 0 ||
      asprintf(&env[k++], "XDG_CONFIG_HOME=%s/.config", home) < 0 ||
      asprintf(&env[k++], "XDG_CACHE_HOME=%s/.cache", home) < 0)
    die("out of memory");
  env[k++] = "GIT_CONFIG_NOSYSTEM=1";
  env[k] = NULL;
  return env;
}

/* In the child: become the sandbox user, then the call. Never returns. */
/* With a root: the cwd is entered by its physical path, which must be the root or below. */
static void enter(const char *cwd, const char *root) {
  if (chdir(cwd) != 0) {
    if (root) dprintf(2, "agentd: cwd does not exist: %s\n", cwd);
    else dprintf(2, "agentd-agent: cannot change to %s: %s\n", cwd, strerror(errno));
    _exit(126);
  }
  if (!root) return;
  char real[4096];
  size_t rl = strlen(root);
  if (!getcwd(real, sizeof real) || strncmp(real, root, rl) != 0 || (real[rl] != 0 && real[rl] != '/')) {
    dprintf(2, "agentd: cwd leaves the workspace\n");
    _exit(126);
  }
}

static void child(const char *cwd, const char *root, char **argv, char **env, const char *mkhome, int in, int out, int err) {
  sigset_t none;
  sigemptyset(&none);
  sigprocmask(SIG_SETMASK, &none, NULL);
  signal(SIGPIPE, SIG_DFL);
  setsid();
  if (dup2(in, 0) < 0 || dup2(out, 1) < 0 || dup2(err, 2) < 0) _exit(126);
  closefrom(3);
  if (setgroups(0, NULL) || setresgid(SANDBOX_GID, SANDBOX_GID, SANDBOX_GID) ||
      setresuid(SANDBOX_UID, SANDBOX_UID, SANDBOX_UID)) {
    dprintf(2, "agentd-agent: cannot drop to the sandbox user: %s\n", strerror(errno));
    _exit(126);
  }
  prctl(PR_SET_PDEATHSIG, SIGKILL);
  if (mkhome && mkdir(mkhome, 0700) != 0) {
    dprintf(2, "agentd-agent: cannot create %s: %s\n", mkhome, strerror(errno));
    _exit(126);
  }
  enter(cwd, root);
  extern char **environ;
  environ = env;
  execvp(argv[0], argv);
  int e = errno;
  dprintf(2, "agentd-agent: %s: %s\n", argv[0], strerror(e));
  _exit(e == ENOENT ? 127 : 126);
}

/*
 * A pipe owned by the sandbox user, as runc makes a container's stdio: a call may reopen
 * its own /dev/stdout (/proc/self/fd/1). Its other end stays in the agent, whose /proc
 * entries no sandbox process may open. agentd's own calls (the workspace in and out, the
 * OOM counter: S_PRIVATE) get root's pipes instead, which no sandbox process can reopen
 * through /proc/PID/fd of the call to write into its output.
 */
static int sandbox_pipe(int fds[2], int private) {
  if (private) return pipe2(fds, O_CLOEXEC); /* root's, 0600: no other process may reopen it */
  setfsgid(SANDBOX_GID);
  setfsuid(SANDBOX_UID);
  int r = pipe2(fds, O_CLOEXEC);
  setfsuid(0);
  setfsgid(0);
  return r;
}

static int nb_pipe(int fds[2], int private) {
  if (sandbox_pipe(fds, private) != 0) return -1;
  fcntl(fds[0], F_SETFL, O_NONBLOCK);
  return 0;
}

/* `want` NUL-ended strings filling [q, end) exactly, or NULL. */
static const unsigned char **strings_of(const unsigned char *q, const unsigned char *end, int want) {
  const unsigned char **strs = calloc((size_t)want, sizeof *strs);
  if (!strs) return NULL;
  for (int i = 0; i < want; i++) {
    const unsigned char *z = q < end ? memchr(q, 0, (size_t)(end - q)) : NULL;
    if (!z) { free(strs); return NULL; }
    strs[i] = q;
    q = z + 1;
  }
  if (q != end) { free(strs); return NULL; }
  return strs;
}

/*
 * S_HOMES (agentd's containment scan): argv plus "--agentd-homes" and the path of every
 * entry of HOME_ROOT, listed here as its owner (uid 1000 may make entries there but not
 * list them, so a scan running as uid 1000 could not see what a call planted or left).
 * Only names are read, never anything below them; HOME_ROOT must be root's directory
 * (opened without following a link). NULL (the call fails) when it cannot be listed.
 */
static char **with_homes(char **argv, int argc) {
  int fd = open(HOME_ROOT, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  struct stat st;
  if (fd < 0 || fstat(fd, &st) != 0 || st.st_uid != 0) { if (fd >= 0) close(fd); return NULL; }
  DIR *d = fdopendir(fd);
  if (!d) { close(fd); return NULL; }
  size_t n = (size_t)argc, cap = n + 16;
  char **out = calloc(cap + 1, sizeof *out);
  if (!out) { closedir(d); return NULL; }
  memcpy(out, argv, (size_t)argc * sizeof *out);
  out[n++] = "--agentd-homes";
  struct dirent *e;
  int bad = 0;
  while (!bad && (errno = 0, e = readdir(d)) != NULL) {
    if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..")) continue;
    if (n + 1 >= cap) {
      char **more = realloc(out, (cap * 2 + 1) * sizeof *out);
      if (!more) { bad = 1; break; }
      out = more;
      cap *= 2;
    }
    if (asprintf(&out[n], HOME_ROOT "/%s", e->d_name) < 0) { bad = 1; break; }
    n++;
  }
  if (errno != 0) bad = 1;
  closedir(d);
  out[n] = NULL;
  if (bad) { for (size_t k = (size_t)argc + 1; k < n; k++) free(out[k]); free(out); return NULL; }
  return out;
}

/* argv of start_call: the listed HOME paths past argc + 1 are ours. */
static void free_argv(char **argv, int argc, int listed) {
  for (int k = 0; k < listed; k++) free(argv[argc + 1 + k]);
  free(argv);
}

/* 'S': u32 timeout ms, u32 max output, u8 flags, u16 argc, u16 envc, then NUL-ended cwd, argv, env. */
static void start_call(uint32_t id, const unsigned char *p, uint32_t len) {
  if (len < 13) return fail_start(id, "agentd-agent: start frame too short");
  if (call_of(id)) return fail_start(id, "agentd-agent: call id in use");
  struct call *c = NULL;
  for (int i = 0; i < MAX_CALLS && !c; i++) if (!calls[i].used) c = &calls[i];
  if (!c) return fail_start(id, "agentd-agent: too many calls at once");
  uint32_t timeout = get32(p), max_out = get32(p + 4);
  uint8_t flags = p[8];
  int argc = p[9] << 8 | p[10], envc = p[11] << 8 | p[12];
  if (argc < 1) return fail_start(id, "agentd-agent: argv is empty");
  int confined = (flags & S_CONFINE) != 0;
  int want = 1 + confined + argc + envc;
  const unsigned char **strs = strings_of(p + 13, p + len, want);
  if (!strs) return fail_start(id, "agentd-agent: malformed start frame");
  const char *cwd = (const char *)strs[0];
  const char *root = confined ? (const char *)strs[1] : NULL;
  const unsigned char **all = strs;
  strs += confined; /* strs[1…] are now argv, then env, whether or not a root came first */
  for (int j = 0; j < envc; j++)
    if (!strchr((const char *)strs[1 + argc + j], '=') || strs[1 + argc + j][0] == '=') {
      free(all);
      return fail_start(id, "agentd-agent: malformed environment entry");
    }
  char **argv = calloc((size_t)argc + 1, sizeof *argv);
  if (!argv) { free(all); return fail_start(id, "agentd-agent: out of memory"); }
  for (int i = 0; i < argc; i++) argv[i] = (char *)strs[1 + i];
  int listed = 0; /* argv entries past argc that are ours to free */
  if (flags & S_HOMES) {
    char **all_argv = with_homes(argv, argc);
    free_argv(argv, argc, listed);
    if (!all_argv) { free(all); return fail_start(id, "agentd-agent: cannot list " HOME_ROOT); }
    argv = all_argv;
    while (argv[argc + 1 + listed]) listed++;
  }
  unsigned char rnd[8] = {0};
  if (getrandom(rnd, sizeof rnd, 0) != sizeof rnd) {
    free_argv(argv, argc, listed);
    free(all);
    return fail_start(id, "agentd-agent: getrandom failed");
  }
  /* agentd's own calls need no HOME (and must not depend on /tmp having room for one). */
  int priv = (flags & S_PRIVATE) != 0;
  char home[64];
  if (priv) snprintf(home, sizeof home, "/nonexistent");
  else snprintf(home, sizeof home, HOME_ROOT "/%02x%02x%02x%02x%02x%02x%02x%02x", rnd[0], rnd[1],
                rnd[2], rnd[3], rnd[4], rnd[5], rnd[6], rnd[7]);
  char **env = call_env(strs + 1 + argc, envc, home);
  free(all);
  int o[2], e[2], i[2] = {-1, -1};
  if (!env || nb_pipe(o, priv)) { free_argv(argv, argc, listed); free(env); return fail_start(id, "agentd-agent: cannot make pipes"); }
  if (nb_pipe(e, priv)) { close(o[0]); close(o[1]); free_argv(argv, argc, listed); free(env); return fail_start(id, "agentd-agent: cannot make pipes"); }
  if (flags & S_STDIN) {
    if (sandbox_pipe(i, priv)) i[0] = i[1] = -1;
    else fcntl(i[1], F_SETFL, O_NONBLOCK);
  } else {
    i[0] = open("/dev/null", O_RDONLY | O_CLOEXEC);
  }
  pid_t pid = i[0] < 0 ? -1 : fork();
  if (pid == 0) child(cwd, root, argv, env, priv ? NULL : home, i[0], o[1], e[1]);
  int fe = errno;
  for (int k = 0; env[k]; k++)
    if (!strncmp(env[k], "HOME=", 5) || !strncmp(env[k], "XDG_CONFIG_HOME=", 16) || !strncmp(env[k], "XDG_CACHE_HOME=", 15))
      free(env[k]);
  free(env);
  free_argv(argv, argc, listed);
  close(o[1]); close(e[1]);
  if (i[0] >= 0) close(i[0]);
  if (pid < 0) {
    close(o[0]); close(e[0]);
    if (i[1] >= 0) close(i[1]);
    char msg[160];
    snprintf(msg, sizeof msg, "agentd-agent: cannot start the process: %s", strerror(fe));
    return fail_start(id, msg);
  }
  memset(c, 0, sizeof *c);
  c->used = 1;
  c->id = id;
  c->pid = pid;
  c->out = o[0];
  c->err = e[0];
  c->in = i[1];
  c->max_out = max_out;
  c->deadline = timeout ? now_ms() + timeout : 0;
  if (!priv) snprintf(c->home, sizeof c->home, "%s", home);
}

/*
 * Writes what it can of the call's pending stdin and credits it to agentd, which sends
 * at most STDIN_WINDOW bytes ahead: a process that does not read its stdin holds up its
 * own call only, never the frames of others.
 */
static void push_stdin(struct call *c) {
  size_t wrote = 0;
  while (c->in >= 0 && c->pend_off < c->pend_len) {
    ssize_t n = write(c->in, c->pend + c->pend_off, c->pend_len - c->pend_off);
    if (n > 0) { c->pend_off += (size_t)n; wrote += (size_t)n; continue; }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && errno == EAGAIN) break;
    send_credit(c, wrote);
    close_stdin(c); /* the process closed its stdin: the rest is dropped (and credited) */
    return;
  }
  send_credit(c, wrote);
  if (c->pend_off == c->pend_len) c->pend_off = c->pend_len = 0;
  if (c->in >= 0 && c->in_eof && c->pend_len == 0) close_stdin(c);
}

static void queue_stdin(struct call *c, const unsigned char *p, uint32_t len) {
  if (c->in < 0) { send_credit(c, len); return; } /* stdin already closed: dropped */
  if (c->pend_len - c->pend_off + len > STDIN_WINDOW) {
    dprintf(2, "agentd-agent: call %u: stdin past its window\n", c->id);
    kill_call(c, F_KILLED);
    close_stdin(c);
    send_credit(c, len);
    return;
  }
  if (c->pend_off > 0) {
    memmove(c->pend, c->pend + c->pend_off, c->pend_len - c->pend_off);
    c->pend_len -= c->pend_off;
    c->pend_off = 0;
  }
  if (c->pend_len + len > c->pend_cap) {
    unsigned char *q = realloc(c->pend, STDIN_WINDOW);
    if (!q) die("out of memory");
    c->pend = q;
    c->pend_cap = STDIN_WINDOW;
  }
  memcpy(c->pend + c->pend_len, p, len);
  c->pend_len += len;
  push_stdin(c);
}

static void handle_frame(char type, uint32_t id, const unsigned char *p, uint32_t len) {
  struct call *c = call_of(id);
  switch (type) {
    case 'S': take_ownership(); start_call(id, p, len); break;
    case 'I':
      if (c && len > 0) queue_stdin(c, p, len);
      break;
    case 'E':
      if (!c || c->in < 0) break;
      if (c->pend_len > c->pend_off) c->in_eof = 1; else close_stdin(c);
      break;
    case 'K':
      if (c) kill_call(c, F_KILLED);
      break;
    case 'A': {
      take_ownership();
      /* 2: another agent owns the container now: its calls are not this agentd's to kill. */
      unsigned char ok = !owns_container() ? 2 : kill_all() == 0 ? 0 : 1;
      send_frame('a', id, &ok, 1);
      break;
    }
    case 'M': {
      unsigned char r = mark(p, len);
      send_frame('a', id, &r, 1);
      break;
    }
    case 'P': send_frame('p', id, p, len); break;
    default: break; /* unknown frames are ignored: a newer agentd may send more */
  }
}

static void parse_frames(void) {
  size_t off = 0;
  while (in_len - off >= HDR) {
    uint32_t len = get32(inbuf + off + 5);
    if (len > MAX_FRAME) { dprintf(2, "agentd-agent: frame of %u bytes refused\n", len); exit(112); }
    if (in_len - off < HDR + len) break;
    handle_frame((char)inbuf[off], get32(inbuf + off + 1), inbuf + off + HDR, len);
    off += HDR + len;
  }
  memmove(inbuf, inbuf + off, in_len - off);
  in_len -= off;
}

/*
 * agentd is gone: every call is killed (its result can no longer be told). The main
 * process stays (the container must, for a worker taking the run over); a second agent
 * started by `docker exec` (--exit-on-eof) exits.
 */
static void agentd_gone(void) {
  in_open = 0;
  out_open = 0;
  oq_off = oq_len = 0;
  for (int i = 0; i < MAX_CALLS; i++) if (calls[i].used) kill_call(&calls[i], F_KILLED);
  if (owns_container()) kill_all(); /* else the new owner's calls run: only ours go */
  if (exit_on_eof) exit(0);
}

static void read_stdin(void) {
  ssize_t n = read(0, inbuf + in_len, HDR + MAX_FRAME - in_len);
  if (n < 0 && (errno == EAGAIN || errno == EINTR)) return;
  if (n <= 0) return agentd_gone();
  in_len += (size_t)n;
  parse_frames();
}

static void check_deadlines(int64_t t) {
  for (int i = 0; i < MAX_CALLS; i++) {
    struct call *c = &calls[i];
    if (!c->used) continue;
    if (c->deadline && c->pid > 0 && t >= c->deadline) { kill_call(c, F_TIMEOUT); c->deadline = 0; }
    if (c->pid == 0 && c->drain_until && t >= c->drain_until && oq_pending() < OUTQ_HIGH) {
      /* A process that escaped the kill (another call runs, so no kill-all) holds a pipe. */
      close_fd(&c->out);
      close_fd(&c->err);
      c->drain_until = 0;
      maybe_finish(c);
    }
  }
}

static int next_wait(int64_t t) {
  int64_t w = -1;
  for (int i = 0; i < MAX_CALLS; i++) {
    struct call *c = &calls[i];
    if (!c->used) continue;
    int64_t d = c->pid > 0 ? c->deadline : c->drain_until;
    if (d && (w < 0 || d - t < w)) w = d - t < 0 ? 0 : d - t;
  }
  return w > 0x7fffffff ? 0x7fffffff : (int)w;
}

/*
 * Kubernetes' emptyDirs are root's and world-writable (Docker's tmpfs are made uid 1000's, /tmp
 * 1777): the first agent gives the sandbox user its workspace and cache (git refuses a
 * repository another user owns) and /tmp its sticky bit (else uid 1000 could rename
 * OWNER_DIR and HOME_ROOT away). Only a directory still root's is changed: an image's own
 * or Docker's are left as they are.
 */
static void own_mounts(void) {
  static const char *const sandbox_dirs[] = {"/workspace", "/cache"};
  struct stat st;
  for (size_t i = 0; i < sizeof sandbox_dirs / sizeof *sandbox_dirs; i++)
    if (lstat(sandbox_dirs[i], &st) == 0 && S_ISDIR(st.st_mode) && st.st_uid == 0 &&
        (st.st_mode & 0777) == 0777) {
      /* chmod first: once it is uid 1000's, root without CAP_FOWNER may not */
      if (chmod(sandbox_dirs[i], 0755) == 0 && chown(sandbox_dirs[i], SANDBOX_UID, SANDBOX_GID) != 0)
        chmod(sandbox_dirs[i], st.st_mode & 07777);
    }
  if (lstat("/tmp", &st) == 0 && S_ISDIR(st.st_mode) && st.st_uid == 0 && (st.st_mode & 0777) == 0777)
    chmod("/tmp", 01777);
}

int main(int argc, char **argv, char **envp) {
  base_env = envp;
  exit_on_eof = argc > 1 && strcmp(argv[1], "--exit-on-eof") == 0;
  signal(SIGPIPE, SIG_IGN);
  sigset_t chld;
  sigemptyset(&chld);
  sigaddset(&chld, SIGCHLD);
  sigprocmask(SIG_BLOCK, &chld, NULL);
  int sfd = signalfd(-1, &chld, SFD_NONBLOCK | SFD_CLOEXEC);
  if (sfd < 0) die("signalfd");
  if (geteuid() != 0) { errno = EPERM; die("must start as root (it drops to uid 1000 per call)"); }
  fcntl(0, F_SETFL, fcntl(0, F_GETFL) | O_NONBLOCK);
  fcntl(1, F_SETFL, fcntl(1, F_GETFL) | O_NONBLOCK);
  /*
   * Where calls' HOMEs go: root's, 01733 — uid 1000 may make its entries there (random
   * names) but cannot list them, remove others', or replace the directory itself (/tmp
   * is sticky), which would leave every later call without a HOME.
   */
  if (!exit_on_eof) own_mounts();
  mkdir(HOME_ROOT, 01733);
  chmod(HOME_ROOT, 01733);
  claim_container();
  inbuf = malloc(HDR + MAX_FRAME);
  if (!inbuf) die("out of memory");
  for (int i = 0; i < MAX_CALLS; i++) calls[i].out = calls[i].err = calls[i].in = -1;
  char hello[64];
  int hl = snprintf(hello, sizeof hello, "agentd-agent 2 %d", (int)getpid());
  send_frame('H', 0, hello, (size_t)hl);

  struct pollfd fds[3 + 3 * MAX_CALLS];
  struct { struct call *c; int which; } who[3 + 3 * MAX_CALLS];
  for (;;) {
    flush_out();
    int n = 0;
    fds[n] = (struct pollfd){.fd = sfd, .events = POLLIN};
    who[n++].c = NULL;
    if (in_open) { fds[n] = (struct pollfd){.fd = 0, .events = POLLIN}; who[n++].c = NULL; }
    if (out_open && oq_pending()) { fds[n] = (struct pollfd){.fd = 1, .events = POLLOUT}; who[n++].c = NULL; }
    int reading = oq_pending() < OUTQ_HIGH;
    for (int i = 0; i < MAX_CALLS; i++) {
      struct call *c = &calls[i];
      if (!c->used) continue;
      if (reading && c->out >= 0) { fds[n] = (struct pollfd){.fd = c->out, .events = POLLIN}; who[n].c = c; who[n++].which = 1; }
      if (reading && c->err >= 0) { fds[n] = (struct pollfd){.fd = c->err, .events = POLLIN}; who[n].c = c; who[n++].which = 2; }
      if (c->in >= 0 && c->pend_len > c->pend_off) { fds[n] = (struct pollfd){.fd = c->in, .events = POLLOUT}; who[n].c = c; who[n++].which = 3; }
    }
    int r = poll(fds, (nfds_t)n, next_wait(now_ms()));
    if (r < 0 && errno != EINTR) die("poll");
    for (int k = 0; r > 0 && k < n; k++) {
      if (!fds[k].revents) continue;
      if (fds[k].fd == sfd && !who[k].c) {
        struct signalfd_siginfo si;
        while (read(sfd, &si, sizeof si) == sizeof si) {}
        reap();
      } else if (fds[k].fd == 0 && !who[k].c) {
        read_stdin();
      } else if (who[k].c && who[k].c->used) {
        struct call *c = who[k].c;
        if (who[k].which == 1 && c->out == fds[k].fd) pump(c, &c->out, 'O');
        else if (who[k].which == 2 && c->err == fds[k].fd) pump(c, &c->err, 'R');
        else if (who[k].which == 3 && c->in == fds[k].fd) push_stdin(c);
      }
    }
    reap();
    check_deadlines(now_ms());
  }
}
