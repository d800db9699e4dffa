import { describe, expect, it } from 'vitest'
import { tokenInterceptor } from './credentials'

describe('tokenInterceptor', () => {
  it('takes a token of printable ASCII, and refuses any other without repeating it', () => {
    expect(tokenInterceptor('mq_AbC-12_x')).toBeTypeOf('function')
    for (const bad of ['', 'mq_abcé', 'mq_a\tb', 'mq_a b', 'mq_a\r\nX-Injected: 1']) {
      let message = ''
      try {
        tokenInterceptor(bad)
      } catch (error) {
        message = (error as Error).message
      }
      expect(message).toBe(
        'token must be non-empty printable ASCII, without spaces (as `mq token create` prints it)',
      )
    }
  })
})
