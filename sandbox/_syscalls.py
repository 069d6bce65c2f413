"""The seccomp policy as data: which x86_64 system calls a sandboxed process may make.

An allowlist. Every call in :data:`ALLOWED` is permitted (a few only with checked arguments, see
:mod:`sandbox._sys`); every call in :data:`DENIED` fails with ``EPERM``; every other number (calls this table
does not know, including any the kernel adds after it was written) fails with ``ENOSYS``, the answer libc
expects from an older kernel, so it falls back where it can.

Audited against the x86_64 table up to Linux 6.17 (``file_setattr``, 469). What is denied and why:

* reaching other processes or the kernel's own state: ``ptrace``, ``process_vm_*``, ``kcmp``, ``pidfd_getfd``,
  ``process_madvise``, ``process_mrelease``, ``perf_event_open``, ``bpf``, ``userfaultfd``, ``syslog``,
  ``lookup_dcookie``, module and kexec calls, ``iopl``/``ioperm``/``modify_ldt``;
* namespaces and mounts: ``unshare``, ``setns``, ``mount`` and the new mount API (``open_tree``, ``move_mount``,
  ``fsopen``.. ``fspick``, ``mount_setattr``, ``open_tree_attr``), ``listmount``/``statmount`` (the mount
  table), ``pivot_root``, ``chroot``, ``umount2``, quotas, swap, ``reboot``, host and domain names, clocks;
* kernel objects that could outlive the process or be shared between executions: System V shared memory,
  semaphores and message queues, POSIX message queues, keyrings (``add_key``, ``request_key``, ``keyctl``);
* host-wide resources one process could take for everyone: Linux AIO (``io_setup`` and friends, a
  machine-wide count of contexts), ``io_uring``, ``sync``/``syncfs``, ``memfd_secret`` (unswappable memory),
  ``fanotify``, ``acct``;
* watching or probing the shared read-only files another execution uses: ``inotify``, ``cachestat``; and
  reading or changing which of them sit in the page cache, a state every execution shares: ``mincore`` (exact
  residency of a mapping), ``fadvise64`` (``POSIX_FADV_DONTNEED`` evicted a runtime file, so one execution
  could clear a bit that the next one read by timing or fault counts), ``readahead``, and ``preadv2`` /
  ``pwritev2`` with ``RWF_NOWAIT`` (fails exactly when the data is not cached; by argument). No ordinary
  program needs them: coreutils ignore a refused ``fadvise``, Python and numpy never call them;
* descriptors whose inode number counts something machine-wide, so that one execution could move it and the
  next read it with ``fstat``: ``pidfd_open`` (a pidfd's inode number is the machine's pid counter, Linux
  6.9+), ``memfd_create`` (one counter for every memfd of the machine); for the same reason ``clone`` with
  ``CLONE_PIDFD``, ``getsockopt`` of ``SO_PEERPIDFD``, ``SO_COOKIE`` (socket cookies are a machine-wide
  counter too) and ``SO_NETNS_COOKIE`` (the network namespace's cookie counts every namespace the machine made,
  and says whether an execution got its slot's last namespace or a new one, which the previous execution
  chooses by leaving a socket behind) and ``setsockopt`` of ``SO_PASSPIDFD`` are refused by argument (see
  :mod:`sandbox._sys`);
* locks that belong to an open file rather than to a process: ``flock`` and ``fcntl(F_OFD_SETLK[W])`` (by
  argument). A descriptor sent over a unix socket to itself stays in flight after its execution ended, until
  the kernel's unix garbage collector runs, and with it a lock on a shared runtime file that the next
  execution saw taken. POSIX ``fcntl`` locks (what sqlite uses) belong to the process and end with it;
* obsolete or unimplemented calls (``uselib``, ``ustat``, ``sysfs``, ``_sysctl``, ``vserver``, ...).

Nothing here installs anything; :func:`sandbox._sys.seccomp_program` compiles this table to BPF.
"""

from __future__ import annotations

__all__ = ["ALLOWED", "ARG_CHECKED", "DENIED", "KNOWN_MAX"]

_ALLOWED_NAMES = """
read:0 write:1 open:2 close:3 stat:4 fstat:5 lstat:6 poll:7 lseek:8 mmap:9 mprotect:10 munmap:11 brk:12
rt_sigaction:13 rt_sigprocmask:14 rt_sigreturn:15 ioctl:16 pread64:17 pwrite64:18 readv:19 writev:20
access:21 pipe:22 select:23 sched_yield:24 mremap:25 msync:26  madvise:28 dup:32 dup2:33 pause:34
nanosleep:35 getitimer:36 alarm:37 setitimer:38 getpid:39 sendfile:40 socket:41 connect:42 accept:43
sendto:44 recvfrom:45 sendmsg:46 recvmsg:47 shutdown:48 bind:49 listen:50 getsockname:51 getpeername:52
socketpair:53 setsockopt:54 getsockopt:55 clone:56 fork:57 vfork:58 execve:59 exit:60 wait4:61 kill:62
uname:63 fcntl:72 fsync:74 fdatasync:75 truncate:76 ftruncate:77 getdents:78 getcwd:79 chdir:80
fchdir:81 rename:82 mkdir:83 rmdir:84 creat:85 link:86 unlink:87 symlink:88 readlink:89 chmod:90 fchmod:91
chown:92 fchown:93 lchown:94 umask:95 gettimeofday:96 getrlimit:97 getrusage:98 sysinfo:99 times:100
getuid:102 getgid:104 setuid:105 setgid:106 geteuid:107 getegid:108 setpgid:109 getppid:110 getpgrp:111
setsid:112 setreuid:113 setregid:114 getgroups:115 setgroups:116 setresuid:117 getresuid:118 setresgid:119
getresgid:120 getpgid:121 setfsuid:122 setfsgid:123 getsid:124 capget:125 capset:126 rt_sigpending:127
rt_sigtimedwait:128 rt_sigqueueinfo:129 rt_sigsuspend:130 sigaltstack:131 utime:132 mknod:133 statfs:137
fstatfs:138 getpriority:140 setpriority:141 sched_setparam:142 sched_getparam:143 sched_setscheduler:144
sched_getscheduler:145 sched_get_priority_max:146 sched_get_priority_min:147 sched_rr_get_interval:148
mlock:149 munlock:150 mlockall:151 munlockall:152 prctl:157 arch_prctl:158 setrlimit:160 gettid:186
 setxattr:188 lsetxattr:189 fsetxattr:190 getxattr:191 lgetxattr:192 fgetxattr:193
listxattr:194 llistxattr:195 flistxattr:196 removexattr:197 lremovexattr:198 fremovexattr:199 tkill:200
time:201 futex:202 sched_setaffinity:203 sched_getaffinity:204 set_thread_area:205 get_thread_area:211
epoll_create:213 remap_file_pages:216 getdents64:217 set_tid_address:218 restart_syscall:219 
timer_create:222 timer_settime:223 timer_gettime:224 timer_getoverrun:225 timer_delete:226
clock_gettime:228 clock_getres:229 clock_nanosleep:230 exit_group:231 epoll_wait:232 epoll_ctl:233
tgkill:234 utimes:235 mbind:237 set_mempolicy:238 get_mempolicy:239 waitid:247 ioprio_set:251
ioprio_get:252 openat:257 mkdirat:258
mknodat:259 fchownat:260 futimesat:261 newfstatat:262 unlinkat:263 renameat:264 linkat:265 symlinkat:266
readlinkat:267 fchmodat:268 faccessat:269 pselect6:270 ppoll:271 set_robust_list:273 get_robust_list:274
splice:275 tee:276 sync_file_range:277 vmsplice:278 utimensat:280 epoll_pwait:281 signalfd:282
timerfd_create:283 eventfd:284 fallocate:285 timerfd_settime:286 timerfd_gettime:287 accept4:288
signalfd4:289 eventfd2:290 epoll_create1:291 dup3:292 pipe2:293 preadv:295 pwritev:296
rt_tgsigqueueinfo:297 recvmmsg:299 prlimit64:302 sendmmsg:307 getcpu:309 sched_setattr:314
sched_getattr:315 renameat2:316 seccomp:317 getrandom:318 execveat:322 membarrier:324
mlock2:325 copy_file_range:326 preadv2:327 pwritev2:328 pkey_mprotect:329 pkey_alloc:330 pkey_free:331
statx:332 rseq:334 pidfd_send_signal:424 clone3:435 close_range:436 openat2:437
faccessat2:439 epoll_pwait2:441 futex_waitv:449 set_mempolicy_home_node:450 fchmodat2:452
map_shadow_stack:453 futex_wake:454 futex_wait:455 futex_requeue:456 mseal:462 setxattrat:463
getxattrat:464 listxattrat:465 removexattrat:466 file_getattr:468 file_setattr:469
"""

_DENIED_NAMES = """
shmget:29 shmat:30 shmctl:31 semget:64 semop:65 semctl:66 shmdt:67 msgget:68 msgsnd:69 msgrcv:70 msgctl:71
ptrace:101 syslog:103 uselib:134 personality:135 ustat:136 sysfs:139 vhangup:153 modify_ldt:154
pivot_root:155 _sysctl:156 adjtimex:159 chroot:161 sync:162 acct:163 settimeofday:164 mount:165 umount2:166
swapon:167 swapoff:168 reboot:169 sethostname:170 setdomainname:171 iopl:172 ioperm:173 create_module:174
init_module:175 delete_module:176 get_kernel_syms:177 query_module:178 quotactl:179 nfsservctl:180
getpmsg:181 putpmsg:182 afs_syscall:183 tuxcall:184 security:185 io_setup:206 io_destroy:207
io_getevents:208 io_submit:209 io_cancel:210 lookup_dcookie:212 epoll_ctl_old:214 epoll_wait_old:215
semtimedop:220 clock_settime:227 vserver:236 mq_open:240 mq_unlink:241 mq_timedsend:242 mq_timedreceive:243
mq_notify:244 mq_getsetattr:245 kexec_load:246 add_key:248 request_key:249 keyctl:250 migrate_pages:256
unshare:272 move_pages:279 perf_event_open:298 fanotify_init:300 fanotify_mark:301 name_to_handle_at:303
open_by_handle_at:304 clock_adjtime:305 syncfs:306 setns:308 process_vm_readv:310 process_vm_writev:311
kcmp:312 finit_module:313 kexec_file_load:320 bpf:321 userfaultfd:323 io_pgetevents:333
io_uring_setup:425 io_uring_enter:426 io_uring_register:427 open_tree:428 move_mount:429 fsopen:430
fsconfig:431 fsmount:432 fspick:433 pidfd_getfd:438 process_madvise:440 mount_setattr:442 quotactl_fd:443
landlock_create_ruleset:444 landlock_add_rule:445 landlock_restrict_self:446 memfd_secret:447
process_mrelease:448 cachestat:451 flock:73 memfd_create:319 pidfd_open:434 inotify_init:253
inotify_add_watch:254 inotify_rm_watch:255
inotify_init1:294 statmount:457 listmount:458 lsm_get_self_attr:459 lsm_set_self_attr:460
lsm_list_modules:461 open_tree_attr:467 mincore:27 readahead:187 fadvise64:221
"""


def _table(text: str) -> dict[str, int]:
    return {name: int(nr) for name, _, nr in (item.partition(":") for item in text.split())}


#: Calls a sandboxed process may make (name -> x86_64 number).
ALLOWED: dict[str, int] = _table(_ALLOWED_NAMES)
#: Calls refused with EPERM (name -> number); any number in neither table gets ENOSYS.
DENIED: dict[str, int] = _table(_DENIED_NAMES)
#: Allowed calls whose arguments the filter checks first (see :func:`sandbox._sys.seccomp_program`).
ARG_CHECKED = (
    "socket",
    "socketpair",
    "clone",
    "ioctl",
    "clone3",
    "getsockopt",
    "setsockopt",
    "setrlimit",
    "prlimit64",
    "fcntl",
    "preadv2",
    "pwritev2",
)
#: The highest number this table was audited against.
KNOWN_MAX = 469
