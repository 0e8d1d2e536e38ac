/**
 * Runs a generate_image plan: streams each image's outcome, sums them up in a single result, and keeps to the tool's
 * timeoutSeconds budget.
 *
 * Every planned image is one provider request, all in flight together. Each outcome is streamed as soon as it is
 * known through `context.emitProgress` (`image_generated` with id, url and, for a file store, path, or `image_failed` with the
 * reason). The budget is enforced here with an owned timer: when it runs out, every outstanding request is aborted
 * (the signal reaches the SDK's HTTP call) and the images already made are still reported. A caller cancel
 * (context.signal) aborts them too, and is rethrown as such.
 */
import {
  ToolAbortedError,
  ToolError,
  type ToolErrorCode,
  ToolExecutionError,
  ToolTimeoutError,
} from "../../core/errors.js";
import type { ToolContext } from "../../core/types.js";
import type { GenerateImageToolPlan, PlannedImage } from "./plan.js";
import { describeProviderError } from "./providers.js";
import type { ImageProvider, ImageProviderName, ImageQuality, ImageStore } from "./types.js";

/** One image that was made and stored. */
export interface GeneratedImageEntry {
  index: number;
  id: string;
  /** `/api/images/<id>`: where its owner fetches it over the HTTP API. */
  url: string;
  /** Absolute path of the stored file, when the store writes files (library use); absent for the database store. */
  path?: string;
  mimeType: string;
  /** File size in bytes. */
  size: number;
  /** The prompt the provider actually used, when it rewrote it. */
  revisedPrompt?: string;
}

/** One image that was not made, and why. */
export interface FailedImageEntry {
  index: number;
  /** `timeout` when the budget cancelled it, `aborted` on a caller cancel, else the provider failure's code. */
  code: ToolErrorCode;
  reason: string;
}

/** The single result generate_image returns. */
export interface GenerateImageResult {
  /** One paragraph for the model: what was made (URL, and the file for a file store), what failed and why. */
  summary: string;
  prompt: string;
  model: string;
  provider: ImageProviderName;
  quality: ImageQuality;
  requested: number;
  planned: number;
  images: GeneratedImageEntry[];
  failures: FailedImageEntry[];
  notes: string[];
}

/** What the runner needs besides the plan. */
export interface GenerateImageDeps {
  provider: ImageProvider;
  store: ImageStore;
}

function abortReason(signal: AbortSignal): ToolError {
  const reason = signal.reason;
  return reason instanceof ToolError ? reason : new ToolAbortedError();
}

function failureOf(error: unknown, signal: AbortSignal): { code: ToolErrorCode; reason: string } {
  if (signal.aborted) {
    const reason = abortReason(signal);
    return reason.code === "timeout"
      ? { code: "timeout", reason: "cancelled because the time budget ran out before the image was ready" }
      : { code: "aborted", reason: "cancelled by the caller" };
  }
  const code: ToolErrorCode = error instanceof ToolError ? error.code : "execution_failed";
  return { code, reason: describeProviderError(error) };
}

/** Rejects when `signal` aborts, so an SDK that ignores its signal cannot hold the call past the budget. */
function untilAborted(signal: AbortSignal): Promise<never> {
  return new Promise<never>((_, reject) => {
    if (signal.aborted) reject(signal.reason);
    else signal.addEventListener("abort", () => reject(signal.reason), { once: true });
  });
}

/** Builds the summary paragraph. */
export function summarizeImages(
  plan: GenerateImageToolPlan,
  images: readonly GeneratedImageEntry[],
  failures: readonly FailedImageEntry[],
): string {
  const planned = plan.images.length;
  const head = `Generated ${images.length} of ${planned} image${planned === 1 ? "" : "s"} with ${plan.model} (${plan.provider}, quality ${plan.quality}).`;
  const made = images.map((i) => `Image ${i.index}: ${i.url}${i.path ? ` (file ${i.path})` : ""}.`);
  // A reason that ends a sentence of its own ("Connection error.") gets no second period.
  const failed = failures.map((f) => `Image ${f.index} failed (${f.code}): ${f.reason.replace(/[.\s]+$/, "")}.`);
  return [head, ...made, ...failed, ...plan.notes].join(" ");
}

/**
 * Makes the planned images, streaming one progress event per image, and returns the summary.
 * Throws the caller's ToolAbortedError when context.signal aborts for a cancel; ToolTimeoutError when the budget
 * ran out before any image was made; ToolExecutionError (with `details.failures`) when every image failed.
 */
export async function runGenerateImagePlan(
  plan: GenerateImageToolPlan,
  context: ToolContext,
  deps: GenerateImageDeps,
): Promise<GenerateImageResult> {
  if (context.signal.aborted && abortReason(context.signal).code !== "timeout") throw abortReason(context.signal);
  const controller = new AbortController();
  const forward = () => controller.abort(context.signal.reason ?? new ToolAbortedError());
  if (context.signal.aborted) forward();
  else context.signal.addEventListener("abort", forward, { once: true });
  const timer = setTimeout(() => {
    controller.abort(
      new ToolTimeoutError(
        `generate_image did not finish within its ${Math.round(plan.budgetMs / 1000)}s budget; outstanding requests were cancelled. Ask for fewer images, or raise timeoutSeconds in the tool settings.`,
        { tool: "generate_image", budgetMs: plan.budgetMs },
      ),
    );
  }, plan.budgetMs);
  timer.unref?.();
  const signal = controller.signal;
  const aborted = untilAborted(signal);
  aborted.catch(() => {});

  const images: GeneratedImageEntry[] = [];
  const failures: FailedImageEntry[] = [];

  const makeOne = async (planned: PlannedImage): Promise<void> => {
    try {
      const image = await Promise.race([
        deps.provider.generate({ prompt: plan.prompt, model: plan.model, quality: plan.quality, signal }),
        aborted,
      ]);
      const stored = await deps.store.save({
        userId: context.userId,
        chatId: context.chatId,
        bytes: image.bytes,
        prompt: plan.prompt,
        model: plan.model,
      });
      const entry: GeneratedImageEntry = {
        index: planned.index,
        id: stored.id,
        url: stored.url,
        ...(stored.path ? { path: stored.path } : {}),
        mimeType: stored.mimeType,
        size: stored.size,
        ...(image.revisedPrompt ? { revisedPrompt: image.revisedPrompt } : {}),
      };
      images.push(entry);
      context.emitProgress({
        kind: "image_generated",
        message: `Image ${planned.index} of ${plan.images.length} generated: ${stored.url}`,
        data: { ...entry, model: plan.model, provider: plan.provider },
      });
    } catch (error) {
      const failure = { index: planned.index, ...failureOf(error, signal) };
      if (!(error instanceof ToolError) && !signal.aborted) {
        context.logger.warn(
          { tool: "generate_image", index: planned.index, err: failure.reason },
          "image request failed",
        );
      }
      failures.push(failure);
      context.emitProgress({
        kind: "image_failed",
        message: `Image ${planned.index} of ${plan.images.length} failed: ${failure.reason}`,
        data: { ...failure, model: plan.model, provider: plan.provider },
      });
    }
  };

  try {
    await Promise.all(plan.images.map(makeOne));
  } finally {
    clearTimeout(timer);
    context.signal.removeEventListener("abort", forward);
  }

  if (context.signal.aborted && abortReason(context.signal).code !== "timeout") throw abortReason(context.signal);
  images.sort((a, b) => a.index - b.index);
  failures.sort((a, b) => a.index - b.index);
  const summary = summarizeImages(plan, images, failures);
  if (images.length === 0) {
    const details = { failures: failures.map((f) => ({ ...f })) };
    if (failures.every((f) => f.code === "timeout")) throw new ToolTimeoutError(summary, details);
    throw new ToolExecutionError(summary, details);
  }
  return {
    summary,
    prompt: plan.prompt,
    model: plan.model,
    provider: plan.provider,
    quality: plan.quality,
    requested: plan.requestedCount,
    planned: plan.images.length,
    images,
    failures,
    notes: plan.notes,
  };
}
