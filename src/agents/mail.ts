/**
 * Mail between the agents of a tree: delivering a run's unread messages before its model turns, agent_send (an
 * idle target is woken into a new run) and agent_wait.
 */
import type { AgentSendLimits, AgentSendResult, AgentWaitResult } from "../core/agents.js";
import { AccessDeniedError, LimitExceededError, NotFoundError, quote, shorten } from "../core/errors.js";
import type { ConversationMessage } from "../providers/types.js";
import type { AgentRecord } from "../storage/agent-records.js";
import { type AgentHost, isDescendant } from "./host.js";
import type { AgentRun, AgentTree } from "./types.js";

/**
 * Takes the run's unread messages and renders them as user messages of its next model turn. The senders of messages
 * (not of replies, which answer this agent's own messages) get this run's answer as a reply when it was woken.
 */
export async function incoming(host: AgentHost, run: AgentRun): Promise<ConversationMessage[]> {
  const messages = await host.repo.consume(run.record.id);
  return messages.map((m) => {
    if (!m.reply) run.replyTo.add(m.senderId);
    return {
      role: "user" as const,
      content: `[Message from agent ${m.senderId}]\n${m.body}`,
    };
  });
}

/** Queues a message from `sender` (see AgentToolService.send); an idle target starts a run for it. */
export async function send(
  host: AgentHost,
  sender: AgentRun,
  input: { targetAgentId: string; message: string },
  limits: AgentSendLimits,
  /** Starts a run for an idle agent (false when it is not idle or no slot is free). */
  wake: (tree: AgentTree, agent: AgentRecord) => Promise<boolean>,
): Promise<AgentSendResult> {
  const tree = sender.tree;
  tree.sendLimits = limits;
  const bytes = Buffer.byteLength(input.message, "utf8");
  if (bytes > limits.messageMaxBytes) {
    throw new LimitExceededError(
      `Message is ${bytes} bytes; MESSAGE_MAX_BYTES is ${limits.messageMaxBytes}. Shorten it or send the essentials.`,
      { limit: "MESSAGE_MAX_BYTES", value: limits.messageMaxBytes, argument: "message" },
    );
  }
  if (input.targetAgentId === sender.record.id) {
    throw new AccessDeniedError("An agent cannot send a message to itself.", { argument: "targetAgentId" });
  }
  const { messageId, queueDepth } = await host.repo.enqueue({
    userId: tree.userId,
    rootId: sender.record.rootId,
    senderId: sender.record.id,
    targetId: input.targetAgentId,
    body: input.message,
    limits: { queueMax: limits.queueMax, pairRatePerMinute: limits.pairRatePerMinute },
  });
  let delivery: AgentSendResult["delivery"] = "queued";
  if (!host.runs.has(input.targetAgentId)) {
    const target = await host.repo.get(tree.userId, input.targetAgentId);
    if (target && target.kind === "child" && (await wake(tree, target))) delivery = "started";
  }
  return { sent: true, targetAgentId: input.targetAgentId, messageId, queueDepth, delivery };
}

/** Waits for agents of `caller`'s subtree (see AgentToolService.wait). */
export async function waitFor(
  host: AgentHost,
  caller: AgentRun,
  input: { agentIds?: string[]; timeoutMs: number },
  signal: AbortSignal,
): Promise<AgentWaitResult> {
  const userId = caller.tree.userId;
  let ids: string[];
  if (input.agentIds && input.agentIds.length > 0) {
    ids = [...new Set(input.agentIds)];
    for (const id of ids) {
      const agent = await host.repo.get(userId, id);
      if (!agent || !isDescendant(caller.record, agent)) {
        throw new NotFoundError(
          `No sub-agent ${quote(id)} below you. Wait only for agents you (or your sub-agents) spawned.`,
          {
            agentId: shorten(id),
          },
        );
      }
    }
  } else {
    ids = (await host.repo.list(userId, { parentId: caller.record.id, limit: 1000 })).map((a) => a.id);
  }
  const deadline = Date.now() + input.timeoutMs;
  for (;;) {
    const agents = (await Promise.all(ids.map((id) => host.repo.get(userId, id)))).filter(
      (a): a is AgentRecord => a !== undefined,
    );
    const running = agents.some((a) => a.status === "running");
    const remaining = deadline - Date.now();
    if (!running || remaining <= 0 || signal.aborted) {
      return {
        agents: agents.map((a) => ({
          agentId: a.id,
          status: a.status,
          response: a.result,
          usage: a.usage,
          ...(a.note ? { note: a.note } : {}),
        })),
        status: running ? "timed_out" : "done",
        timedOut: running,
      };
    }
    // Wake on any local run finishing, on the caller's cancel, or after a short poll (runs of other instances).
    await new Promise<void>((resolve) => {
      const done = () => {
        clearTimeout(timer);
        host.finishListeners.delete(done);
        signal.removeEventListener("abort", done);
        resolve();
      };
      const timer = setTimeout(done, Math.min(remaining, 1000));
      timer.unref?.();
      host.finishListeners.add(done);
      signal.addEventListener("abort", done, { once: true });
    });
  }
}
