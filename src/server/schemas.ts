/**
 * TypeBox schemas of the HTTP API's requests and responses. They validate bodies at runtime and are the source of the
 * OpenAPI document at /api/openapi.json.
 */
import Type from "typebox";

export const ErrorBody = Type.Object(
  {
    error: Type.Object({
      code: Type.String({ description: "Stable error code, e.g. validation_failed, invalid_settings, not_found." }),
      message: Type.String(),
      details: Type.Optional(Type.Record(Type.String(), Type.Unknown())),
    }),
  },
  { $id: "ErrorBody" },
);

export const ToolParameterDescriptorSchema = Type.Object({
  name: Type.String(),
  type: Type.Union([
    Type.Literal("string"),
    Type.Literal("integer"),
    Type.Literal("number"),
    Type.Literal("boolean"),
    Type.Literal("string[]"),
    Type.Literal("object[]"),
  ]),
  description: Type.String(),
  min: Type.Optional(Type.Number()),
  max: Type.Optional(Type.Number()),
  allowedValues: Type.Optional(Type.Array(Type.String())),
  maxLength: Type.Optional(
    Type.Integer({ description: "string: longest value; string[]: longest entry (characters)" }),
  ),
  default: Type.Optional(Type.Unknown()),
  unit: Type.Optional(Type.String()),
  adminOnly: Type.Optional(Type.Boolean()),
  fields: Type.Optional(
    Type.Array(Type.Record(Type.String(), Type.Unknown()), {
      description: "object[] settings: the fields of each entry, each a descriptor of this same shape",
    }),
  ),
});

export const ToolDefinitionSchema = Type.Object({
  name: Type.String(),
  description: Type.String(),
  parameters: Type.Record(Type.String(), Type.Unknown()),
});

export const ToolSettingsDescriptorSchema = Type.Object(
  {
    name: Type.String(),
    title: Type.String(),
    description: Type.String(),
    category: Type.Union([Type.Literal("system"), Type.Literal("image"), Type.Literal("interaction")]),
    enabled: Type.Boolean(),
    enabledByDefault: Type.Boolean(),
    canDisable: Type.Boolean(),
    enablingRequiresAdmin: Type.Boolean(),
    lockedKeys: Type.Array(Type.String()),
    version: Type.Integer({
      minimum: 0,
      description: "Version of the stored settings (also the ETag); changes on every write.",
    }),
    parameters: Type.Record(Type.String(), Type.Unknown()),
    defaultParameters: Type.Record(Type.String(), Type.Unknown()),
    parameterDescriptors: Type.Array(ToolParameterDescriptorSchema),
    definition: ToolDefinitionSchema,
    annotations: Type.Object(
      {
        readOnlyHint: Type.Boolean(),
        destructiveHint: Type.Boolean(),
        idempotentHint: Type.Boolean(),
        openWorldHint: Type.Boolean(),
      },
      { description: "Behaviour hints shown to people and MCP clients; never used as policy." },
    ),
    external: Type.Optional(
      Type.Object(
        {
          kind: Type.Literal("mcp"),
          server: Type.String(),
          tool: Type.String(),
          trusted: Type.Boolean(),
          contentHash: Type.String(),
        },
        { description: "Present on tools imported from an external MCP server." },
      ),
    ),
    unavailableReason: Type.Optional(
      Type.String({
        description:
          "Present when the tool cannot work on this host as configured (e.g. no API key): it is not offered to models even when enabled.",
      }),
    ),
  },
  { $id: "ToolSettingsDescriptor" },
);

/** Answer of DELETE /api/admin/users/:user/settings/tools/:toolName/locks. */
export const UnlockResponse = Type.Object({
  unlocked: Type.Array(Type.String(), { description: "The keys whose lock was removed (their values stay)." }),
  tool: ToolSettingsDescriptorSchema,
});

export const ToolSettingsListResponse = Type.Object({ tools: Type.Array(ToolSettingsDescriptorSchema) });

/** GET /api/tools: the definitions offered to the user's models (enabled tools that can work on this host). */
export const ToolListResponse = Type.Object({ tools: Type.Array(ToolDefinitionSchema) });

/** GET /api/me: who the token belongs to. */
export const MeResponse = Type.Object({
  userId: Type.String(),
  admin: Type.Boolean({ description: "Named in TOOLHOST_ADMIN_USERS" }),
});

export const UpdateToolSettingsBodySchema = Type.Object(
  {
    enabled: Type.Optional(Type.Boolean()),
    parameters: Type.Optional(
      Type.Record(Type.String(), Type.Unknown(), { description: "Values to set; null resets one to its default." }),
    ),
  },
  { additionalProperties: false },
);

/** Body of an admin's PUT of another user's settings: the user's own body plus whether to lock what is set. */
export const AdminUpdateToolSettingsBodySchema = Type.Object(
  {
    ...UpdateToolSettingsBodySchema.properties,
    lock: Type.Optional(
      Type.Boolean({
        description:
          "Lock the keys set here for the user, so they cannot change them back (default: true for a user who is not an admin, false for an admin, as `toolhost settings set --user`); a reset (null) lifts a key's lock.",
      }),
    ),
  },
  { additionalProperties: false },
);

export const ExecuteToolBody = Type.Object(
  {
    arguments: Type.Optional(Type.Unknown({ description: "The tool's arguments: a JSON object (or a JSON string)." })),
    workingDirectory: Type.Optional(
      Type.String({ description: "Working directory to bind for this call (absolute)." }),
    ),
    chatId: Type.Optional(
      Type.String({
        minLength: 1,
        description: "Run in this chat's context (its working directory and freshness ledger).",
      }),
    ),
    approvalId: Type.Optional(
      Type.String({
        minLength: 1,
        description:
          "Run a call approved earlier: the id from a denied_by_policy result whose approval has since been answered allow_once/allow_always. The arguments must be exactly the approved ones (access_denied otherwise); an approval runs once.",
      }),
    ),
    onAsk: Type.Optional(
      Type.Union([Type.Literal("return"), Type.Literal("wait")], {
        description:
          "When the approval policy asks: return (default) at once with a denied_by_policy result holding the pending approvalId, or wait until it is answered (POST /api/approvals/:id) or expires (TOOLHOST_APPROVAL_TIMEOUT_SECONDS, default 15 min) and then run or deny.",
      }),
    ),
  },
  { additionalProperties: false },
);

export const ExecuteToolResponse = Type.Union([
  Type.Object({ ok: Type.Literal(true), result: Type.Unknown(), durationMs: Type.Number() }),
  Type.Object({
    ok: Type.Literal(false),
    error: Type.Object({
      code: Type.String(),
      message: Type.String(),
      details: Type.Optional(Type.Record(Type.String(), Type.Unknown())),
    }),
    durationMs: Type.Number(),
  }),
]);

const NullableString = Type.Union([Type.String(), Type.Null()]);

/** GET /api/admin/audit response: tool calls (every tool, every surface) and settings changes, newest first. */
export const AuditListResponse = Type.Object({
  entries: Type.Array(
    Type.Object({
      id: Type.String(),
      createdAt: Type.String(),
      kind: Type.String({ description: "tool_call or settings_change" }),
      userId: Type.String({ description: "Whose call, or whose settings changed" }),
      actor: NullableString,
      chatId: NullableString,
      tool: Type.String(),
      arguments: Type.Unknown({ description: "The call's arguments, secrets redacted" }),
      command: Type.Unknown({ description: "Shell calls: the command (argv or string)" }),
      cwd: NullableString,
      outcome: NullableString,
      errorCode: NullableString,
      exitCode: Type.Union([Type.Number(), Type.Null()]),
      termination: Type.String(),
      durationMs: Type.Number(),
      approval: NullableString,
      approvedBy: NullableString,
      sandboxed: Type.Union([Type.Boolean(), Type.Null()]),
      details: Type.Unknown({ description: "Settings changes: {old, new}, secrets redacted" }),
    }),
  ),
});

/** A stored API token as listed: never the token nor its hash. */
export const TokenInfoSchema = Type.Object({
  id: Type.String(),
  userId: Type.String(),
  label: Type.Union([Type.String(), Type.Null()]),
  createdAt: Type.String({ description: "ISO-8601 UTC" }),
  lastUsedAt: Type.Union([Type.String(), Type.Null()], {
    description: "When a request last used it (ISO-8601 UTC, updated at most once a minute); null if never.",
  }),
  expiresAt: Type.Union([Type.String(), Type.Null()], {
    description: "When it stops working (ISO-8601 UTC); null: never.",
  }),
  prefix: Type.Union([Type.String(), Type.Null()], {
    description: "The token's first characters (th_ and 6 more), to tell which id is yours; null for older tokens.",
  }),
});

export const TokenListResponse = Type.Object({ tokens: Type.Array(TokenInfoSchema) });

export const CreateTokenBody = Type.Object(
  {
    userId: Type.String({ pattern: "^[A-Za-z0-9._@-]{1,128}$", description: "The user the token acts as." }),
    label: Type.Optional(Type.String({ maxLength: 200, description: "A note to remember the token by." })),
    expiresIn: Type.Optional(
      Type.String({
        maxLength: 20,
        description:
          "Lifetime: a number and a unit, m, h, d or w (e.g. 30d; at most 10 years). Absent: the token never expires.",
      }),
    ),
  },
  { additionalProperties: false },
);

export const IssuedTokenResponse = Type.Object({
  id: Type.String(),
  userId: Type.String(),
  label: Type.Union([Type.String(), Type.Null()]),
  expiresAt: Type.Union([Type.String(), Type.Null()], { description: "When it stops working; null: never." }),
  token: Type.String({ description: "The bearer token; shown only in this response (only its hash is stored)." }),
});
