/**
 * How the terminal answers approval asks (`toolhost chat`, `toolhost call`): on a terminal, a prompt showing the
 * tool, the command or path and why it asks (allow once / allow always / deny, with optional words for the model);
 * without a terminal, a `denied_by_policy` refusal naming why the call asks (no approval is stored, so there is no
 * id nobody could answer) unless `--yes` allows every ask once.
 */
import type { ApprovalAnswer, ApprovalRequestView, ApprovalResponder } from "../app/approvals/service.js";
import { cliActor } from "../app/approvals/service.js";
import { printable } from "./util.js";

/** Options of the terminal responder. */
export interface CliResponderOptions {
  /** `--yes`: allow every ask once without prompting. */
  yes: boolean;
  /** Whether a person is at a terminal (stdin and stderr are TTYs). */
  interactive: boolean;
  /** Called before and after a prompt (the chat renderer stops its spinner meanwhile). */
  pause?: () => void;
  resume?: () => void;
}

/** Prefix of `decidedBy` for answers no person gave (the gate then reports `denied_by_policy`). */
export const POLICY_ANSWER_PREFIX = "policy:";

/** The terminal's ApprovalResponder. Prompts one at a time when several calls ask at once. */
export function cliResponder(options: CliResponderOptions): ApprovalResponder {
  if (options.yes) {
    return { answer: () => Promise.resolve({ decision: "allow_once", decidedBy: `${cliActor()} (--yes)` }) };
  }
  if (!options.interactive) {
    // Nobody to ask: the gate refuses at once (denied_by_policy), naming why it asks; no approval is stored.
    return {
      unattended: "There is no terminal to ask on: rerun with --yes to allow such calls once.",
      answer: () => Promise.resolve(undefined),
    };
  }
  let queue: Promise<unknown> = Promise.resolve();
  return {
    answer(request, signal) {
      const next = queue.then(() => prompt(request, signal, options));
      queue = next.catch(() => {});
      return next;
    },
  };
}

/**
 * The title and body of the prompt's note: the tool (and agent), the command or path, the working directory and why
 * it asks. Everything in it that came from a model — the arguments, and the reason, which quotes the command's
 * words — is shown with its control characters escaped (see printable): an escape sequence in a command cannot move
 * the cursor over the lines that show it.
 */
export function approvalNote(request: ApprovalRequestView): { title: string; body: string } {
  const who = request.agentPath ? ` (agent ${printable(request.agentPath.split("/").join(" › "))})` : "";
  const what = printable(request.subjects.length > 0 ? request.subjects.join("\n") : request.preview, {
    multiline: true,
  });
  const where = request.workingDirectory ? `\nin ${printable(request.workingDirectory)}` : "";
  const reason = printable(request.reason, { multiline: true });
  return { title: `${printable(request.tool)}${who} asks for approval`, body: `${what}${where}\n\n${reason}` };
}

async function prompt(
  request: ApprovalRequestView,
  signal: AbortSignal,
  options: CliResponderOptions,
): Promise<ApprovalAnswer | undefined> {
  if (signal.aborted) return undefined;
  const clack = await import("@clack/prompts");
  options.pause?.();
  try {
    // Prompts go to stderr: stdout carries the model's answer.
    const output = process.stderr;
    const note = approvalNote(request);
    clack.note(note.body, note.title, { output });
    const choice = await clack.select({
      message: `Run ${request.tool}?`,
      options: [
        { value: "allow_once", label: "Allow once" },
        ...(request.allowAlways
          ? [{ value: "allow_always", label: "Allow always", hint: "stores an allow rule" }]
          : []),
        { value: "deny", label: "Deny" },
      ],
      signal,
      output,
    });
    if (clack.isCancel(choice)) {
      return { decision: "deny", message: "The user cancelled the approval prompt.", decidedBy: cliActor() };
    }
    let message: string | undefined;
    if (choice === "deny") {
      const words = await clack.text({ message: "Tell the model why (optional)", placeholder: "", signal, output });
      if (!clack.isCancel(words) && typeof words === "string" && words.trim()) message = words.trim();
    }
    return { decision: choice as ApprovalAnswer["decision"], ...(message ? { message } : {}), decidedBy: cliActor() };
  } finally {
    options.resume?.();
  }
}
