const strictUtf8 = new TextDecoder('utf-8', { fatal: true, ignoreBOM: true })

/** A body as text can carry it: UTF-8 text when it is valid UTF-8, else base64. */
export interface EncodedBody {
  readonly body: string
  readonly encoding: 'utf8' | 'base64'
}

/** Decodes `bytes` as UTF-8 when they are valid UTF-8, else encodes them as base64. */
export function encodeBody(bytes: Uint8Array): EncodedBody {
  try {
    return { body: strictUtf8.decode(bytes), encoding: 'utf8' }
  } catch {
    return { body: Buffer.from(bytes).toString('base64'), encoding: 'base64' }
  }
}
