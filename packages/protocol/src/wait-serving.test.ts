import { describe, expect, it } from 'vitest'
import { waitServing } from './wait-serving'

describe('waitServing', () => {
  it('gives up on an address where nothing serves, naming it', async () => {
    await expect(waitServing('127.0.0.1:1', 300)).rejects.toThrow(
      /127.0.0.1:1 did not become healthy within 300 ms/,
    )
  })
})
