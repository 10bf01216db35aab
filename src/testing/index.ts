/**
 * `managed-agents-worker/testing`: a local emulator of the Managed Agents API subset a
 * self-hosted worker uses. See `README.md` in this folder.
 * @packageDocumentation
 */
export { startEmulator, Emulator } from './emulator/emulator.js';
export type {
  EmulatorOptions,
  CreateSessionOptions,
  CreateSkillOptions,
  SessionSkillOptions,
  SessionSubagentOptions,
  SkillHandle,
  SessionResourceOptions,
  SessionOutcome,
  SessionSnapshot,
  WorkItemSnapshot,
} from './emulator/emulator.js';
export type { ScriptStep, SessionEnd, ToolStep, PlainStep, ThreadScript } from './emulator/script.js';
export type { FaultRule, FaultHandle, Faults } from './emulator/faults.js';
export type { RequestRecord } from './emulator/server.js';
export type { CredentialKind } from './emulator/auth.js';
export type { EmulatorEvents, EnvironmentType } from './emulator/state.js';
export type { MemoryObject, MemoryPrefixObject, MemoryStoreObject, MemoryWrite } from './emulator/model/memory-store.js';
export type {
  SessionEvent,
  SessionStatus,
  ThreadStatus,
  ToolResultRecord,
  MemoryAccess,
  AgentSkillReference,
} from './emulator/model/session.js';
export type { SkillFiles, SkillVersionObject } from './emulator/model/skill.js';
export type { MultiagentListing } from './emulator/model/multiagent.js';
export type { WorkState, HeartbeatObject, WorkObject } from './emulator/model/work-queue.js';
export type { ApiErrorType } from './emulator/errors.js';
export {
  signWebhook,
  generateWebhookSecret,
  sessionWebhookEvent,
  postWebhooksTo,
  type SignedWebhook,
  type SignOptions,
  type WebhookEventPayload,
  type WebhookDelivery,
  type WebhookPoster,
  type SessionCreatedSource,
} from './webhook-signing.js';
