export {
  createWebhookHandler,
  type WebhookHandler,
  type WebhookHandlerOptions,
  type WebhookRequest,
  type WebhookResponse,
  type WebhookWorker,
} from './webhook-handler.js';
