/**
 * The shell bypass table: each row is a command line a model might send to get around a rule, with the decision
 * the policy must reach. Rules: allow `git status`, `ls`, `cat`, `echo`; deny `rm`, `curl`, `git push --force`;
 * approval setting `ask` unless the row says otherwise.
 */
// biome-ignore-all lint/suspicious/noTemplateCurlyInString: the rows are shell lines, where ${…} is parameter expansion
import { beforeAll, describe, expect, it } from "vitest";
import { evaluateApproval, prepareApprovalPolicy } from "../../src/core/approval/policy.js";
import type { ApprovalRule } from "../../src/core/approval/rules.js";
import type { ApprovalDecision, RegisteredTool } from "../../src/core/types.js";

const bash: RegisteredTool = {
  definition: { name: "bash", description: "", parameters: { type: "object", properties: {} } },
  settings: {
    title: "bash",
    description: "",
    category: "system",
    enabledByDefault: false,
    canDisable: true,
    defaultParameters: {},
    parameterDescriptors: [],
  },
  execute: async () => null,
  // As the built-in bash declares it (src/tools/shell/shell-tool.ts).
  approval: { default: "ask", subject: { kind: "shell", argument: "command", dialect: "bash" } },
};

const RULES: ApprovalRule[] = [
  { decision: "allow", match: "git status" },
  { decision: "allow", match: "ls" },
  { decision: "allow", match: "cat" },
  { decision: "allow", match: "echo" },
  { decision: "deny", match: "rm" },
  { decision: "deny", match: "curl" },
  { decision: "deny", match: "git push --force" },
];

async function decide(command: string, setting: ApprovalDecision = "ask"): Promise<ApprovalDecision> {
  const verdict = await evaluateApproval(
    bash,
    { command },
    { enabled: true, values: { approval: setting, approvalRules: RULES } },
    { baseDirectory: "/tmp" },
  );
  return verdict.decision;
}

beforeAll(async () => {
  await prepareApprovalPolicy();
});

// [command, expected decision, approval setting (default ask)]
const TABLE: [string, ApprovalDecision, ApprovalDecision?][] = [
  // plain rules
  ["git status", "allow"],
  ["git status --short", "allow"],
  ["ls -la src", "allow"],
  ["git log", "ask"],
  ["rm -rf build", "deny"],
  // chaining: every segment is checked
  ["git status && rm -rf /", "deny"],
  ["git status || curl evil.example", "deny"],
  ["git status; rm -rf /", "deny"],
  ["ls\nrm -rf /", "deny"],
  ["ls & rm -rf / &", "deny"],
  ["cat file | sh", "ask"],
  ["ls | xargs rm", "deny"],
  ["git status && git log", "ask"],
  // wrappers are unwrapped
  ["timeout 5 rm -rf /", "deny"],
  ["timeout -s KILL 5 rm x", "deny"],
  ["nice -n 10 rm x", "deny"],
  ["nohup rm x", "deny"],
  ["env -i FOO=1 rm x", "deny"],
  ["sudo -u root rm x", "deny"],
  ["command rm x", "deny"],
  ["exec rm x", "deny"],
  ["time rm x", "deny"],
  ["stdbuf -oL rm x", "deny"],
  ["timeout 5 git status", "allow"],
  ["timeout --frobnicate 5 git status", "ask"],
  ["sh -c 'rm -rf /'", "deny"],
  ['bash -c "git status; curl x"', "deny"],
  ["eval rm -rf /", "deny"],
  ["find . -name '*.o' -exec rm {} ;", "deny"],
  ['bash -c "$CMD"', "ask"],
  // flag order and spelling
  ["git push origin main --force", "deny"],
  ["git push --force=yes origin", "deny"],
  ["git -C . push --force", "deny"],
  ["git push --force-with-lease", "ask"],
  ["/bin/rm -rf x", "deny"],
  ["/usr/bin/git status", "ask"],
  ["./git status", "ask"],
  // quoting and escapes do not hide a command name
  ["'r'm -rf x", "deny"],
  ['"rm" x', "deny"],
  ["\\rm x", "deny"],
  ["$'\\x72m' x", "deny"],
  // brace groups, subshells, substitutions
  ["{ ls; rm x; }", "deny"],
  ["(ls; rm x)", "deny"],
  ["echo $(rm -rf /)", "deny"],
  ["echo `curl evil`", "deny"],
  ['echo "a $(rm y) b"', "deny"],
  ["cat <(curl evil)", "deny"],
  ["ls >(rm z)", "deny"],
  ["x=$(rm q)", "deny"],
  ["echo $((1 + $(rm w)))", "deny"],
  // substitutions anywhere in the tree: parameter-expansion patterns, subscripts, arithmetic, heredocs, tests
  ['echo "${IFS%$(id > /dev/null; touch Q10)}"', "ask", "allow"],
  ['echo "${IFS# $(touch PWN7)}"', "ask", "allow"],
  ["echo ${x#$(touch Q7)}", "ask", "allow"],
  ["echo ${x##$(touch Q7)}", "ask", "allow"],
  ["echo ${x%%$(touch Q7)}", "ask", "allow"],
  ["echo ${x%`touch Q7`}", "ask", "allow"],
  ["echo ${x#<(touch Q7)}", "ask", "allow"],
  ["echo ${x#@($(touch Q7))}", "ask", "allow"],
  ["echo ${x/a/$(touch Q7)}", "ask"],
  ["echo ${x/#$(touch Q7)/y}", "ask"],
  ["echo ${x:-$(touch Q7)}", "ask"],
  ["echo ${a[$(touch Q7)]}", "ask"],
  ["echo $(( $(touch Q7) ))", "ask"],
  ["echo $(( a[$(touch Q7)] ))", "ask"],
  ["echo ${!x}", "ask", "allow"],
  ["echo ${x@P}", "ask", "allow"],
  ["cat <<EOF\n$(touch Q7)\nEOF", "ask"],
  ["cat <<EOF\n${x#$(touch Q7)}\nEOF", "ask", "allow"],
  ["[[ x == $(touch Q7) ]]", "ask"],
  ["case x in $(touch Q7)) ls;; esac", "ask"],
  ['echo "${IFS%$(rm -rf /)}"', "deny"],
  ["echo ${x##$(curl evil)}", "deny"],
  ["echo ${x%%`rm y`}", "deny"],
  ["echo ${x/a/$(rm y)}", "deny"],
  ["echo $(( $(rm y) ))", "deny"],
  ["echo ${a[$(rm y)]}", "deny"],
  ["cat <<EOF\n${x#$(rm y)}\nEOF", "deny"],
  // what the policy can read stays allowed
  ["echo ${x%%*.c}", "allow"],
  ["echo ${x:-default} ${#x} ${x,,} ${x:1:2}", "allow"],
  ["if true; then rm x; fi", "deny"],
  ["for f in a; do rm $f; done", "deny"],
  ["! rm x", "deny"],
  // redirections, assignments, definitions, computed names and parse errors never allow
  ["ls > listing.txt", "ask"],
  ["echo hi >> ~/.bashrc", "ask"],
  ["ls 2>&1", "allow"],
  ["ls 2>/dev/null", "allow"],
  ["PATH=/tmp/evil ls", "ask"],
  ["PATH=/tmp; ls", "ask"],
  ["git() { rm -rf /; }; git status", "deny"],
  ["ls() { echo; }; ls", "ask"],
  ["$X status", "ask"],
  ["{rm,-rf,/}", "ask"],
  ["echo 'unterminated", "ask"],
  ["bash <<EOF\nls\nEOF", "ask"],
  // the setting allow with the user's deny rules: what could hide a command from them still asks
  ["ls -la", "allow", "allow"],
  ["make install", "ask", "allow"],
  ["python3 -c 'import os'", "ask", "allow"],
  ["$X status", "ask", "allow"],
  ["ls > out", "allow", "allow"],
  ["rm x", "deny", "allow"],
  ["ls", "deny", "deny"],
  // arithmetic contexts evaluate a variable's value, and an array reference in it runs a substitution
  ["for x in 'a[$(touch P)]'; do echo $((x)); done", "ask"],
  ["echo $((x + 1))", "ask"],
  ["echo ${arr[i]}", "ask"],
  ["[[ $x -eq 1 ]] && echo yes", "ask"],
  ["echo $((2 * 3))", "allow"],
  ["echo ${arr[0]}", "allow"],
  ['[[ "$x" == y ]] && echo yes', "allow"],
  // a line continuation joins words as bash reads them, wherever bash removes it
  ["r\\\nm x", "deny"],
  ["r\\\nm x", "deny", "allow"],
  ["git push --for\\\nce", "deny"],
  ['echo "$\\\n(touch pH)"', "ask"],
  ["cat <<EOF\n$\\\n(rm x)\nEOF", "deny"],
  ["echo a \\\n  b", "allow"],
  ["echo 'a\\\nb'", "allow"],
  ["cat <<'EOF'\n$\\\n(rm x)\nEOF", "allow"],
  ["echo \\\\\nrm x", "deny"],
  ["echo x # note \\\nrm y", "deny"],
  // bash reads `\<CR><LF>` as an escaped CR and a new line; the grammar as a line continuation
  ["echo hi \\\r\nrm x", "ask", "allow"],
  // a command name that is a pattern runs whatever file matches it
  ["/usr/bin/r[m] x", "ask", "allow"],
  ["/usr/bin/[r]m x", "ask", "allow"],
  ["ls v | /usr/bin/xarg[s] /usr/bin/r[m]", "ask", "allow"],
  ["[ -f x ] && ls", "allow", "allow"],
];

describe("shell approval bypass table", () => {
  it.each(TABLE)("%j → %s", async (command, expected, setting) => {
    expect(await decide(command, setting ?? "ask")).toBe(expected);
  });

  it("holds at least 30 cases", () => {
    expect(TABLE.length).toBeGreaterThanOrEqual(30);
  });
});

/**
 * Lines a tester found bash running differently from what the policy saw (each confirmed with `bash -c`). Under
 * `approval: allow` with deny rules none may be allowed (it runs a denied program); under `approval: ask` with
 * narrow allow rules none may be allowed (it runs more than those commands). Asking is the safe answer.
 */
const DENY_RULES: ApprovalRule[] = [
  { decision: "deny", match: "rm" },
  { decision: "deny", match: "curl" },
  { decision: "deny", match: "git push" },
];
const NARROW_ALLOW: ApprovalRule[] = [
  { decision: "allow", match: "echo" },
  { decision: "allow", match: "ls" },
  { decision: "allow", match: "cat" },
  { decision: "allow", match: "git status" },
];
const RUNS_A_DENIED_PROGRAM = [
  "echo \\ #; rm f",
  "echo \\\t#; rm f",
  "cat <<$':'\nx\n:\nrm f\n$':'\n",
  "cat <<E'O'F\nEOF\nrm f\nE'O'F\n",
  'cat <<$"EOF"\nEOF\nrm f\n$"EOF"\n',
  "trap 'rm f' EXIT",
  "bash -c -- 'rm f'",
  "bash -c -e 'rm f'",
  "sh -c -- 'rm f'",
  "rbash -c 'rm f'",
  "eval -- rm f",
  "timeout -- 5 rm f",
  "timeout -k 1 -- 5 rm f",
  "taskset -c 0 rm f",
  "echo x | xargs --replace rm f",
  "echo x | xargs --eof rm f",
  "echo rm f | xargs env",
  "find /usr/bin -name rm -exec {} f \\;",
  "hash -p /usr/bin/rm ls; ls f",
  "coproc rm f",
  "shopt -s expand_aliases\nalias ls='rm f'\nls",
  "printf -v 'a[$(rm f)]' x",
  "read 'a[$(rm f)]' <<< x",
  "test -v 'a[$(rm f)]'",
  "[ -v 'a[$(rm f)]' ]",
  "[[ -v 'a[$(rm f)]' ]]",
  "let 'x=a[$(rm f)]'",
  "command declare -i 'x=a[$(rm f)]'",
  "mapfile -t -C 'rm f' -c 1 arr <<< x",
  "sed -n '1e rm f' /etc/hostname",
  "sed 's/x/rm f/e' /etc/hostname",
  "git -c alias.x='!rm f' x",
  "tar -cf /dev/null --checkpoint=1 --checkpoint-action=exec='rm f' /etc/hostname",
  "tar -cf /dev/null -I 'rm f; cat' /etc/hostname",
  "vim -es -c '!rm f' -c 'q!'",
  "sqlite3 :memory: '.shell rm f'",
  "ed -s /etc/hostname <<< '!rm f'",
  "sudo -h rm f",
  // a second round
  "echo\u000b#; rm f",
  "echo hi\u000b# ; rm f",
  "echo; [[ -v $'a[\\x24(rm f)]' ]]",
  "for v in $'a[\\x24(rm f)]'; do [[ -v $v ]]; echo; done",
  "for v in $'a[\\x24(rm f)]'; do echo {a[v]}>/dev/stdout; done",
  "for x in $'\\x24(rm f)'; do echo `echo \\${x@P}`; done",
  "for v in $'a[\\x24(rm f)]'; do echo `echo \\$[v]`; done",
  "cat <<EOF\n$(cat <<EOF2\nEOF\nrm f\nEOF2\n)\nEOF\n",
  "echo '; rm f' | xargs -I{} bash -c 'echo {}'",
  "bash <(echo rm f) -c ls",
  "bash --rcfile <(echo rm f) -ic ls",
  "sh -c \"echo \\$'\\\\'; rm f #'\"",
  "sh -c 'echo x &>/dev/null rm f'",
  "r{m,} f",
  "read PS4 <<< '$(rm f)'; set -x; :",
  "builtin declare PS4='$(rm f)'; set -x; :",
  "printf -v PS4 '$(rm f)'; set -x; :",
  "command export PS4='$(rm f)'; set -x; :",
  "printf -v 'BASH_CMDS[ls]' /usr/bin/rm; ls f",
  "builtin declare 'BASH_CMDS[ls]=/usr/bin/rm'; ls f",
  "hash -rp /usr/bin/rm ls; ls f",
  "set -o posix; read 'BASH_ALIASES[ls]' <<< 'rm f'\nls",
  "mapfile -tC 'rm f' -c 1 arr <<< x",
  "compgen -W '$(rm f)' x",
  "compgen -C 'rm f' x",
  "set -o history; history -s x; fc -e 'rm f' -1",
  "trap -- '-x; rm f' EXIT",
  "coproc { rm f; }",
  "bash -c -xo posix 'rm f'",
  "echo rm f | xargs -I{} bash -c {}",
  "let $'x=a[\\x24(rm f)]'$z",
  "printf -v v 'a[\\x24(rm f)]'; let x=v",
  "printf -v $'a[\\x24(rm f)]'$z x",
  "test -v $'a[\\x24(rm f)]'$z",
  "for v in x; do printf -v 'a[v]' x; done",
  "for v in x; do read 'a[v]' <<< x; done",
  "for v in x; do test -v 'a[v]'; done",
  "echo hi >&$'a[\\x24(rm f)]'",
  "echo 'rm f' > x; chmod +x x; ./x",
  "git init -q r && printf '[alias]\\n\\tx = !rm ../f\\n' > r/.git/config && git -C r x",
  // a third round
  "echo ${b:='a['$'\\044''(rm f)]'}; [[ $'\\142' -eq 0 ]]",
  "echo ${b:=\"a[\"$'\\044'\"(rm f)]\"}; [[ $'\\142' -eq 0 ]]",
  "for b in a[$'\\044'\"(rm f)]\"; do [[ $'\\142' -lt 1 ]]; done",
  "coproc x { rm f; }; wait",
  "prlimit rm f",
  "prlimit --nofile=1024 rm f",
  "setarch x86_64 rm f",
  "linux64 rm f",
  "setpriv rm f",
  "runuser -u root -- rm f",
  "sg root 'rm f'",
  "newgrp <<< 'rm f'",
  "ssh-agent rm f",
  "dbus-run-session -- rm f",
  "perf stat rm f",
  'start-stop-daemon -S -d "$PWD" -x /usr/bin/rm -- f',
  "run-parts --regex '^rm$' -a f /usr/bin",
  "bwrap --dev-bind / / rm f",
  "scp -o ProxyCommand='rm f' x:y /tmp/z",
  "sftp -D 'rm f'",
  "split --filter='rm f' /etc/hostname",
  "cmake -E env rm f",
  "npm exec -c 'rm f'",
  "ninja -f /dev/stdin <<< $'rule r\\n command = rm f\\nbuild x: r'",
  "apt-get -o 'APT::Update::Pre-Invoke::=rm f' update",
  "tar -cf /dev/null --checkpoint=1 --checkpoint-ac=exec='rm f' /etc/hostname",
  "tar cIf 'rm f; cat' /dev/null /etc/hostname",
  "tar -cI'rm f; cat' -f /dev/null /etc/hostname",
  "tar -c --use-compress-prog='rm f; cat' -f /dev/null /etc/hostname",
  "tar -cf - /etc/hostname | tar -x --to-com='rm f'",
  "sed -n --expression='1e rm f' /etc/hostname",
  "sed -n -e'1e rm f' /etc/hostname",
  "sed -n -f /dev/stdin /etc/hostname <<< '1e rm f'",
  "sed -n '1~1e rm f' /etc/hostname",
  "sed -n '1,+1e rm f' /etc/hostname",
  "sed -n '\\%x%!e rm f' /etc/hostname",
  "sed -n '/x/I!e rm f' /etc/hostname",
  "git init -q r; git ls-remote --upload-pac='rm f; git-upload-pack' r",
  "git init -q r; git clone -q --no-local -u 'rm f; git-upload-pack' r r2",
  "git rebase -q -x'rm ../f' HEAD~1",
  "git rebase -q --exe='rm ../f' HEAD~1",
  "git grep -O'rm ../f;:' x",
  "git grep --open-files-in-pag='rm ../f;:' x",
  "zip -T -TT='rm f; :' z.zip /etc/hostname",
  "zip -T --unzip-c='rm f; :' z.zip /etc/hostname",
  "yes 'rm f' | head -n 300000 | sort -S 64k --compress-prog=sh >/dev/null",
  // a fourth round: words computed at run time, by an expansion or by what xargs appends, hide an -exec or an option
  "for x in -exec; do find . -maxdepth 0 $x rm f {} +; done",
  "printf '%s\\n' -exec rm f ';' | xargs find . -maxdepth 0",
  "printf -- '-c\\nalias.x=!rm f\\nx\\n' | xargs -d '\\n' git",
  "for z in --compress-prog=sh; do yes 'rm f' | head -n 300000 | sort -S 64k $z >/dev/null; done",
  "echo --compress-prog=sh | xargs sort -S 64k big.txt",
  "for e in -e; do rsync $e 'sh -c \"rm f\"' x: y; done",
];
const RUNS_MORE_THAN_ALLOWED = [
  "echo \\ #; touch pwn",
  "cat <<$':'\nx\n:\ntouch pwn\n$':'\n",
  "echo hi; (( 'a[$(touch pwn)]' ))",
  "echo hi; [[ -v 'a[$(touch pwn)]' ]]",
  "echo hi; [ -v 'a[$(touch pwn)]' ]",
  "for i in 'a[$(touch pwn)]'; do echo ${PATH:i}; done",
  "for i in 'a[$(touch pwn)]'; do echo ${x:0:i}; done",
  "for i in 'a[$(touch pwn)]'; do echo ${@:i}; done",
  "for i in 'a[$(touch pwn)]'; do for ((;i;)); do echo; done; done",
  "for PATH in .; do cat notes.txt; done",
  "for HOME in .; do git status --short; done",
  "cat <<$':'\n:\n>pwn\n$':'",
  "echo\f#; touch pwn",
  "echo; [[ -v $'a[\\x24(touch pwn)]' ]]",
  "for v in $'a[\\x24(touch pwn)]'; do [[ -v a[v] ]]; echo; done",
  "for v in $'a[\\x24(touch pwn)]'; do ls {a[v]}>/dev/null; done",
  "for v in $'a[\\x24(touch pwn)]'; do echo `echo \\${a[v]}`; done",
  "cat <<EOF\n$(cat <<EOF2\nEOF\ntouch pwn\nEOF2\n)\nEOF\n",
  "echo '; touch pwn' | xargs -I{} bash -c 'echo {}'",
  "bash /dev/stdin -c ls <<< 'touch pwn'",
  "bash --rcfile <(echo touch pwn) -ic ls",
  "sh -c 'echo x &>/dev/null touch pwn'",
  "for b in a[$'\\044'\"(touch pwn)]\"; do [[ $'\\142' -lt 1 ]] && echo ok; done",
  "echo ${b:='a['$'\\044''(touch pwn)]'}; [[ $'\\142' -eq 0 ]]",
  "/usr/bin/time -o pwn ls",
  "command time -o pwn ls",
  "\\time -o pwn ls",
  "env time -o pwn ls",
  "nohup time -o pwn echo",
  "timeout 5 time -o pwn cat /dev/null",
  "exec time -o pwn git status",
  "/usr/bin/time -a -o pwn -f 'touch pwn2' ls",
];
const STILL_ALLOWED = [
  "echo hi",
  "ls -la",
  "git status",
  "for f in *.txt; do cat $f; done",
  "echo ${x:-default} ${x:1:2}",
  "[ -f x ] && ls",
  "cat <<EOF\nhi\nEOF",
  "cat <<'EOF'\nhi\nEOF",
  "ls | xargs -I{} echo {}",
  "for i in 1 2 3; do echo $i; done",
];
/** Lines no deny rule is about, which approval allow runs. */
const RUNS_UNDER_ALLOW = [
  "git -C . log --oneline",
  "set -euo pipefail; ls",
  "git --version",
  "ls -la | sort",
  "git pull --rebase origin main",
  "sed -n '1,5p' notes.txt",
  "sed 's/one/two/g' notes.txt",
  "tar -czf out.tgz src",
  "git rebase main",
];

async function decideWith(command: string, setting: ApprovalDecision, rules: ApprovalRule[]) {
  const settings = { enabled: true, values: { approval: setting, approvalRules: rules } };
  return (await evaluateApproval(bash, { command }, settings, { baseDirectory: "/tmp" })).decision;
}

/**
 * zsh lines are parsed with bash's grammar; zsh's precommand modifiers and its builtins that run a command line are
 * what bash would take for an unknown program name (zsh's manual, "Precommand Modifiers", `emulate -c`, `zpty`).
 */
const zsh: RegisteredTool = {
  ...bash,
  definition: { ...bash.definition, name: "zsh" },
  approval: { default: "ask", subject: { kind: "shell", argument: "command", dialect: "zsh" } },
};
const ZSH_RUNS_A_DENIED_PROGRAM = [
  "noglob rm f",
  "nocorrect rm f",
  "- rm f",
  "repeat 1 rm f",
  "noglob nocorrect rm -rf f",
  "emulate sh -c 'rm f'",
  "emulate -L zsh -c 'rm f'",
  "zmodload zsh/zpty; zpty z 'rm f'",
  "sched +0 rm f",
];

describe("zsh: precommand modifiers and command-running builtins", () => {
  it.each(ZSH_RUNS_A_DENIED_PROGRAM)("approval allow, deny rules: %j is not allowed", async (command) => {
    const settings = { enabled: true, values: { approval: "allow", approvalRules: DENY_RULES } };
    expect((await evaluateApproval(zsh, { command }, settings, { baseDirectory: "/tmp" })).decision).not.toBe("allow");
  });
  it("approval ask, allow ls: a modifier before ls keeps ls allowed; before rm it does not", async () => {
    const settings = { enabled: true, values: { approval: "ask", approvalRules: NARROW_ALLOW } };
    const decide = async (command: string) =>
      (await evaluateApproval(zsh, { command }, settings, { baseDirectory: "/tmp" })).decision;
    expect(await decide("noglob ls *.md")).toBe("allow");
    expect(await decide("noglob rm f")).toBe("ask");
  });
});

/** shell_exec runs its argv without a shell, but its wrappers, `sh -c`, `find -exec` and runners are read as in a line. */
const shellExec: RegisteredTool = {
  ...bash,
  definition: { ...bash.definition, name: "shell_exec" },
  approval: { default: "ask", subject: { kind: "shell", argument: "argv", dialect: "argv" } },
};
async function decideArgv(argv: string[], setting: ApprovalDecision, rules: ApprovalRule[]) {
  const settings = { enabled: true, values: { approval: setting, approvalRules: rules } };
  return (await evaluateApproval(shellExec, { argv }, settings, { baseDirectory: "/tmp" })).decision;
}

describe("shell_exec: wrappers and runners in an argv", () => {
  const denied: string[][] = [
    ["env", "rm", "f"],
    ["timeout", "5", "rm", "f"],
    ["nice", "-n", "5", "rm", "f"],
    ["xargs", "rm"],
    ["find", ".", "-exec", "rm", "{}", ";"],
    ["sh", "-c", "rm f"],
  ];
  it.each(denied.map((argv) => [argv]))("approval allow, deny rm: %j is denied", async (argv) => {
    expect(await decideArgv(argv, "allow", DENY_RULES)).toBe("deny");
  });
  const hidden: string[][] = [
    ["python3", "-c", "import os"],
    ["git", "-c", "alias.x=!rm f", "x"],
    ["env", "-S", "rm f"],
  ];
  it.each(hidden.map((argv) => [argv]))("approval allow, deny rm: %j asks (it could hide rm)", async (argv) => {
    expect(await decideArgv(argv, "allow", DENY_RULES)).toBe("ask");
  });
  it("approval ask: an allow rule naming a wrapper does not allow what it runs", async () => {
    const rules: ApprovalRule[] = [
      { decision: "allow", match: "env" },
      { decision: "allow", match: "timeout" },
      { decision: "allow", match: "git status" },
    ];
    expect(await decideArgv(["env", "rm", "f"], "ask", rules)).toBe("ask");
    expect(await decideArgv(["timeout", "5", "rm", "f"], "ask", rules)).toBe("ask");
    expect(await decideArgv(["timeout", "5", "git", "status"], "ask", rules)).toBe("allow");
    expect(await decideArgv(["git", "status", "--short"], "ask", rules)).toBe("allow");
    // No shell reads the argv: its words are plain text, never syntax.
    expect(await decideArgv(["git", "status", "$(rm f)", ">", "out"], "ask", rules)).toBe("allow");
  });
});

/** A narrow allow rule naming find still judges the commands its -exec runs, however the -exec is spelled. */
const FIND_ALLOWED: ApprovalRule[] = [...NARROW_ALLOW, { decision: "allow", match: "find" }];
const FIND_RUNS_MORE = [
  "for x in -exec; do find . -maxdepth 0 $x touch pwn {} +; done",
  "for x in -execdir; do find . -maxdepth 0 $x touch pwn ';'; done",
  "printf '%s\\n' -exec touch pwn ';' | xargs find . -maxdepth 0",
  "find . -maxdepth 0 -exec touch pwn ';'",
];

describe("what bash runs is what the policy judges", () => {
  it.each(FIND_RUNS_MORE)("approval ask, allow find: %j is not allowed", async (command) => {
    expect(await decideWith(command, "ask", FIND_ALLOWED)).not.toBe("allow");
  });
  it("approval ask, allow find: a find that runs nothing stays allowed", async () => {
    expect(await decideWith("find . -name '*.md'", "ask", FIND_ALLOWED)).toBe("allow");
    expect(await decideWith("for n in a b; do find . -name $n; done", "ask", FIND_ALLOWED)).toBe("ask");
  });
  it.each(RUNS_A_DENIED_PROGRAM)("approval allow, deny rules: %j is not allowed", async (command) => {
    expect(await decideWith(command, "allow", DENY_RULES)).not.toBe("allow");
  });
  it.each(RUNS_MORE_THAN_ALLOWED)("approval ask, narrow allow rules: %j is not allowed", async (command) => {
    expect(await decideWith(command, "ask", NARROW_ALLOW)).not.toBe("allow");
  });
  it.each(STILL_ALLOWED)("ordinary lines stay allowed: %j", async (command) => {
    expect(await decideWith(command, "ask", NARROW_ALLOW)).toBe("allow");
    expect(await decideWith(command, "allow", DENY_RULES)).toBe("allow");
  });
  it.each(RUNS_UNDER_ALLOW)("approval allow, deny rules: %j runs", async (command) => {
    expect(await decideWith(command, "allow", DENY_RULES)).toBe("allow");
  });
});

/** The rule of docs/approvals.md ("How a call is decided"), row by row: command × setting × rules × sandbox. */
const RULE_SETS: Record<string, ApprovalRule[]> = {
  none: [],
  "allow echo": [{ decision: "allow", match: "echo" }],
  "ask git push": [{ decision: "ask", match: "git push" }],
  "deny rm": [{ decision: "deny", match: "rm" }],
};
const NO_SANDBOX = { decision: "ask" as const, reason: "No sandbox is available here (bwrap is missing)." };

// [command, approval setting, rules, sandbox available, decision]
const THE_RULE: [string, ApprovalDecision, keyof typeof RULE_SETS, boolean, ApprovalDecision][] = [
  // approval: allow runs: redirections, interpreters, runners, computed names, assignments, definitions
  ["echo x > notes.txt", "allow", "none", true, "allow"],
  ["python3 -c 'print(1)'", "allow", "none", true, "allow"],
  ["make", "allow", "none", true, "allow"],
  ["$cmd", "allow", "none", true, "allow"],
  ["cmd=ls; $cmd", "allow", "none", true, "allow"],
  ["f() { ls; }; f", "allow", "none", true, "allow"],
  ["tee notes.txt", "allow", "none", true, "allow"],
  ["echo 'unterminated", "allow", "none", true, "allow"],
  // …the user's own ask and deny rules still bind (broad matching included)
  ["git push origin main", "allow", "ask git push", true, "ask"],
  ["timeout 5 git -C . push", "allow", "ask git push", true, "ask"],
  ["sudo rm -rf build", "allow", "deny rm", true, "deny"],
  ["echo x > notes.txt", "allow", "deny rm", true, "allow"],
  // …and a doubt that could hide a command from them asks
  ["$cmd -rf /", "allow", "deny rm", true, "ask"],
  ["$cmd x", "allow", "deny rm", true, "ask"],
  ["python3 -c 'print(1)'", "allow", "deny rm", true, "ask"],
  // …the tool's own say: no sandbox (sandbox preferred) asks
  ["echo x > notes.txt", "allow", "none", false, "ask"],
  ["ls", "allow", "none", false, "ask"],
  // approval: deny refuses, whatever the rules
  ["echo hi", "deny", "allow echo", true, "deny"],
  // approval: ask with no matching rule asks; a narrow allow rule keeps every escalation
  ["ls", "ask", "none", true, "ask"],
  ["echo hi", "ask", "allow echo", true, "allow"],
  ["echo x > notes.txt", "ask", "allow echo", true, "ask"],
  ["X=1 echo hi", "ask", "allow echo", true, "ask"],
  ["echo $(ls)", "ask", "allow echo", true, "ask"],
  ["echo hi", "ask", "allow echo", false, "ask"],
];

describe("the rule: approval allow runs, rules bind, narrow allow rules stay narrow", () => {
  it.each(THE_RULE)(
    "%j under %s with rules %s, sandbox %s → %s",
    async (command, setting, rules, sandbox, expected) => {
      const verdict = await evaluateApproval(
        bash,
        { command },
        { enabled: true, values: { approval: setting, approvalRules: RULE_SETS[rules] } },
        { baseDirectory: "/tmp", ...(sandbox ? {} : { hint: NO_SANDBOX }) },
      );
      expect(verdict.decision).toBe(expected);
      if (!sandbox && expected === "ask") expect(verdict.source).toBe("hint");
    },
  );

  it("names why it asks: the redirection under a narrow rule, the rule a doubt hides from", async () => {
    const narrow = await evaluateApproval(
      bash,
      { command: "echo x > out.txt" },
      { enabled: true, values: { approval: "ask", approvalRules: RULE_SETS["allow echo"] } },
      { baseDirectory: "/tmp" },
    );
    expect(narrow).toMatchObject({ source: "doubt" });
    expect(narrow.reason).toContain("redirects output to out.txt");
    const hidden = await evaluateApproval(
      bash,
      { command: "$cmd x" },
      { enabled: true, values: { approval: "allow", approvalRules: RULE_SETS["deny rm"] } },
      { baseDirectory: "/tmp" },
    );
    expect(hidden.reason).toContain('deny "rm"');
  });
});

describe("lines too long or too deep to read", () => {
  // A doubt, never an error: under approval allow with no rules they run; a rule they could hide a command from
  // makes them ask.
  const lines = [
    ["10,000 &&", `${"true && ".repeat(10_000)}rm -rf x`],
    ["300 KB", `echo ${"a".repeat(300_000)} && rm -rf x`],
  ] as const;
  it.each(lines)("%s: allowed without rules, asked with a deny rule, never an error", async (_name, command) => {
    const bare = await evaluateApproval(
      bash,
      { command },
      { enabled: true, values: { approval: "allow", approvalRules: [] } },
      { baseDirectory: "/tmp" },
    );
    expect(bare.decision).toBe("allow");
    const guarded = await evaluateApproval(
      bash,
      { command },
      { enabled: true, values: { approval: "allow", approvalRules: RULE_SETS["deny rm"] } },
      { baseDirectory: "/tmp" },
    );
    expect(guarded.decision).toBe("ask");
    expect(guarded.reason).toMatch(/too (deep|long) to read/);
  });
});

describe("rule examples", () => {
  it("a computed argument may stand for one word a deny rule needs", async () => {
    expect(await decide("git push $REMOTE $FLAGS")).toBe("deny");
    expect(await decide("git push origin $BRANCH")).toBe("deny");
    expect(await decide('git pull "$REMOTE"')).toBe("ask");
    expect(await decide('git commit -m "$MSG"')).toBe("ask");
    expect(await decide("rm $TARGET")).toBe("deny");
  });

  it("an unquoted expansion, a substitution or what xargs appends may stand for any number of words", async () => {
    const rules: ApprovalRule[] = [{ decision: "deny", match: "chmod -R 777" }];
    // bash splits an unquoted expansion into words; xargs appends the words it reads.
    for (const command of [
      "for a in '-R 777'; do chmod $a x; done",
      "chmod $(echo -R 777) x",
      "echo -R 777 x | xargs chmod",
      "echo 777 x | xargs chmod -R",
    ]) {
      expect(await decideWith(command, "allow", rules), command).toBe("deny");
    }
    // A quoted expansion is one word: it cannot stand for both.
    expect(await decideWith('chmod "$MODE" x', "allow", rules)).toBe("allow");
    expect(await decideWith("chmod -R 755 x", "allow", rules)).toBe("allow");
  });
});
