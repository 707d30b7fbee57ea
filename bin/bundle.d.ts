/** The folder of a build of the checkout's sources as they are now (bin/bundle.js). */
export declare const freshBundle: (root: string) => Promise<string>
