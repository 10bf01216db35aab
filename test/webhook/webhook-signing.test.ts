// Pins the testing kit's webhook signing: what signWebhook produces is accepted by the SDK's own
// `client.beta.webhooks.unwrap`, and any change to the body, the secret or the timestamp window
// makes unwrap refuse it.
import Anthropic from '@anthropic-ai/sdk';
import { describe, expect, it } from 'vitest';
import { generateWebhookSecret, sessionWebhookEvent, signWebhook } from '../../src/testing/webhook-signing.js';

const client = new Anthropic({ apiKey: 'unused', baseURL: 'http://127.0.0.1:9' });

describe('signWebhook', () => {
  const secret = generateWebhookSecret();
  const event = sessionWebhookEvent('sesn_123');

  it('produces headers the SDK unwrap accepts, and unwrap returns the event', () => {
    const signed = signWebhook(event, secret);
    const parsed = client.beta.webhooks.unwrap(signed.body, { headers: signed.headers, key: secret });
    expect(parsed).toEqual(event);
    expect(signed.headers['webhook-id']).toBe(event.id);
    expect(signed.headers['webhook-signature']).toMatch(/^v1,[A-Za-z0-9+/]+=*$/);
  });

  it('builds a session.status_run_started event shaped like the SDK type', () => {
    expect(event).toMatchObject({ type: 'event', data: { id: 'sesn_123', type: 'session.status_run_started' } });
    expect(Number.isNaN(Date.parse(event.created_at))).toBe(false);
  });

  const refusals: Array<{
    description: string;
    tamper: (s: { body: string; headers: Record<string, string> }) => { body: string; headers: Record<string, string>; key?: string };
  }> = [
    { description: 'a changed body', tamper: (s) => ({ ...s, body: s.body.replace('sesn_123', 'sesn_999') }) },
    { description: 'another secret', tamper: (s) => ({ ...s, key: generateWebhookSecret() }) },
    { description: 'a missing signature header', tamper: (s) => ({ ...s, headers: { ...s.headers, 'webhook-signature': '' } }) },
    { description: 'a signature from another webhook id', tamper: (s) => ({ ...s, headers: { ...s.headers, 'webhook-id': 'msg_other' } }) },
  ];
  it.each(refusals)('unwrap refuses $description', ({ tamper }) => {
    const t = tamper(signWebhook(event, secret));
    expect(() => client.beta.webhooks.unwrap(t.body, { headers: t.headers, key: t.key ?? secret })).toThrow();
  });

  it('unwrap refuses a delivery signed more than 5 minutes ago', () => {
    const old = signWebhook(event, secret, { timestampSeconds: Math.floor(Date.now() / 1000) - 600 });
    expect(() => client.beta.webhooks.unwrap(old.body, { headers: old.headers, key: secret })).toThrow(/too old/);
  });

  it('generates whsec_ secrets holding 24 random bytes', () => {
    const s = generateWebhookSecret();
    expect(s).toMatch(/^whsec_/);
    expect(Buffer.from(s.slice(6), 'base64')).toHaveLength(24);
    expect(generateWebhookSecret()).not.toBe(s);
  });
});
