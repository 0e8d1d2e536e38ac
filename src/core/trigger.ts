/**
 * The function-id API: `await trigger('tool::file_read', { path })` returns the tool's result directly and throws
 * the classified ToolError on failure. It dispatches through the same executeTool path as a model's tool call
 * (settings, argument validation, time budget, metrics).
 */

import { LOCAL_USER } from "./config.js";
import {
  AccessDeniedError,
  DeniedByPolicyError,
  DeniedByUserError,
  LimitExceededError,
  NotFoundError,
  type SerializedToolError,
  ToolAbortedError,
  ToolArgumentError,
  type ToolError,
  ToolExecutionError,
  ToolParameterError,
  ToolTimeoutError,
} from "./errors.js";
import { getDefaultRuntime, type ToolCallContext, type ToolRuntime } from "./runtime.js";

/** Options of trigger: the call context (user `local` by default) and the runtime to use. */
export interface TriggerOptions extends Partial<ToolCallContext> {
  runtime?: ToolRuntime;
}

/** Rebuilds the ToolError subclass matching a serialized error's code. */
export function errorFromSerialized(error: SerializedToolError): ToolError {
  const classes = {
    validation_failed: ToolArgumentError,
    invalid_settings: ToolParameterError,
    access_denied: AccessDeniedError,
    not_found: NotFoundError,
    timeout: ToolTimeoutError,
    aborted: ToolAbortedError,
    execution_failed: ToolExecutionError,
    denied_by_user: DeniedByUserError,
    denied_by_policy: DeniedByPolicyError,
  } as const;
  if (error.code === "limit_exceeded") {
    const details = (error.details ?? {}) as { limit?: unknown; value?: unknown };
    return new LimitExceededError(error.message, {
      ...error.details,
      limit: String(details.limit ?? "unknown"),
      value: Number(details.value ?? 0),
    });
  }
  const Class = classes[error.code] ?? ToolExecutionError;
  return new Class(error.message, error.details);
}

/**
 * Runs the tool named by a function id (`tool::<name>`). Tools that are off only by default may run (the host
 * application chose the tool, not a model); a tool the user explicitly disabled is refused.
 * Throws ToolArgumentError for a malformed id, and the tool's classified ToolError when the call fails.
 */
export async function trigger<T = any>(
  functionId: string,
  args: unknown = {},
  options: TriggerOptions = {},
): Promise<T> {
  const match = /^tool::([a-zA-Z][a-zA-Z0-9_-]*)$/.exec(functionId);
  if (!match?.[1]) {
    throw new ToolArgumentError(
      `Unknown function id "${functionId}"; expected "tool::<name>", e.g. "tool::file_read".`,
    );
  }
  const { runtime = getDefaultRuntime(), ...call } = options;
  const outcome = await runtime.executeTool(match[1], args, {
    userId: LOCAL_USER,
    allowDefaultDisabled: true,
    ...call,
  });
  if (!outcome.ok) throw errorFromSerialized(outcome.error);
  return outcome.result as T;
}
