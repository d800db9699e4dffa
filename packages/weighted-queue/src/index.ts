export { InvalidArgumentError, LimitExceededError, QueueError, QueueErrorCode } from './errors'
export { parseWeight, WEIGHT_DEFAULT, WEIGHT_MAX, WEIGHT_MIN } from './weight'
