import { bigint, boolean, index, integer, pgTable, primaryKey, text } from 'drizzle-orm/pg-core';

/** One row per concurrency key; exists to be row-locked so acquires on a key serialise. */
export const qQuotaKeys = pgTable('q_quota_keys', {
  key: text('key').primaryKey(),
  /** The limit the key's latest acquire passed (null before one). Migration 0004. */
  lastLimit: integer('last_limit'),
});

/** Quota holder leases on the database clock (ms). */
export const qQuotaHolders = pgTable('q_quota_holders', {
  holder: text('holder').primaryKey(),
  expiresMs: bigint('expires_ms', { mode: 'number' }).notNull(),
  /** Set by the first statement that sees the lease over; a lapsed holder never counts again, whatever the clock does. */
  lapsed: boolean('lapsed').notNull().default(false),
});

/** Concurrency slots in use per (key, holder). */
export const qQuotaSlots = pgTable(
  'q_quota_slots',
  {
    key: text('key').notNull(),
    holder: text('holder').notNull(),
    used: integer('used').notNull(),
  },
  (t) => [primaryKey({ columns: [t.key, t.holder] }), index('q_quota_slots_holder').on(t.holder)],
);

/** Running admitted count per (key, window); also the row lock for rate admission. */
export const qQuotaWindows = pgTable(
  'q_quota_windows',
  {
    key: text('key').notNull(),
    windowMs: bigint('window_ms', { mode: 'number' }).notNull(),
    used: bigint('used', { mode: 'number' }).notNull().default(0),
  },
  (t) => [primaryKey({ columns: [t.key, t.windowMs] })],
);

/** The per-(key, window) admission log. */
export const qQuotaAdmits = pgTable(
  'q_quota_admits',
  {
    key: text('key').notNull(),
    windowMs: bigint('window_ms', { mode: 'number' }).notNull(),
    atMs: bigint('at_ms', { mode: 'number' }).notNull(),
    n: integer('n').notNull(),
  },
  (t) => [index('q_quota_admits_key').on(t.key, t.windowMs, t.atMs)],
);

// Deprecated aliases: the objects were renamed with the tables (async_* → q_*, migration 0003).
/** @deprecated Use {@link qQuotaKeys} (the table is now `q_…`). */
export const asyncQuotaKeys = qQuotaKeys;
/** @deprecated Use {@link qQuotaHolders} (the table is now `q_…`). */
export const asyncQuotaHolders = qQuotaHolders;
/** @deprecated Use {@link qQuotaSlots} (the table is now `q_…`). */
export const asyncQuotaSlots = qQuotaSlots;
/** @deprecated Use {@link qQuotaWindows} (the table is now `q_…`). */
export const asyncQuotaWindows = qQuotaWindows;
/** @deprecated Use {@link qQuotaAdmits} (the table is now `q_…`). */
export const asyncQuotaAdmits = qQuotaAdmits;
