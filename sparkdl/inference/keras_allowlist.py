"""The names a model config may hold when sparkdl loads it in safe mode
(tf-keras 2.21.0, Keras 3.15.1, TensorFlow 2.21.0).

Written by scripts/keras_allowlist.py (which says what is left out and why); do not edit by hand.
"""

from __future__ import annotations

# Classes tf-keras may build (.h5 files, .keras files of Keras 2).
TF_KERAS_CLASSES = frozenset(
    """
    AbstractRNNCell Activation ActivityRegularization Add AddLoss AddMetric AdditiveAttention
    AlphaDropout Attention Average AveragePooling1D AveragePooling2D AveragePooling3D AvgPool1D
    AvgPool2D AvgPool3D BaseRandomLayer BatchNormalization BatchNormalizationBase BatchNormalizationV1
    BatchNormalizationV2 Bidirectional CategoryEncoding CenterCrop Concatenate Constant ConstantV2
    Constraint Conv1D Conv1DTranspose Conv2D Conv2DTranspose Conv3D Conv3DTranspose ConvLSTM1D
    ConvLSTM2D ConvLSTM3D Convolution1D Convolution1DTranspose Convolution2D Convolution2DTranspose
    Convolution3D Convolution3DTranspose Cropping1D Cropping2D Cropping3D CuDNNGRU CuDNNLSTM Dense
    DepthwiseConv1D DepthwiseConv2D Discretization Dot Dropout ELU EinsumDense Embedding Flatten
    Functional GRU GRUCell GRUCellV1 GRUCellV2 GRUV1 GRUV2 GaussianDropout GaussianNoise
    GlobalAveragePooling1D GlobalAveragePooling2D GlobalAveragePooling3D GlobalAvgPool1D GlobalAvgPool2D
    GlobalAvgPool3D GlobalMaxPool1D GlobalMaxPool2D GlobalMaxPool3D GlobalMaxPooling1D
    GlobalMaxPooling2D GlobalMaxPooling3D GlorotNormal GlorotNormalV2 GlorotUniform GlorotUniformV2
    GroupNormalization HashedCrossing Hashing HeNormal HeNormalV2 HeUniform HeUniformV2 Identity
    IdentityV2 Initializer InputLayer InputSpec IntegerLookup L1 L1L2 L2 LSTM LSTMCell LSTMCellV1
    LSTMCellV2 LSTMV1 LSTMV2 Layer LayerNormalization LeakyReLU LecunNormal LecunNormalV2 LecunUniform
    LecunUniformV2 LocallyConnected1D LocallyConnected2D Masking MaxNorm MaxPool1D MaxPool2D MaxPool3D
    MaxPooling1D MaxPooling2D MaxPooling3D Maximum MinMaxNorm Minimum Model MultiHeadAttention Multiply
    NonNeg Normalization Ones OnesV2 Orthogonal OrthogonalRegularizer OrthogonalV2 PReLU Permute Policy
    PolicyV1 RNN RadialConstraint RandomBrightness RandomContrast RandomCrop RandomFlip RandomHeight
    RandomNormal RandomNormalV2 RandomRotation RandomTranslation RandomUniform RandomUniformV2
    RandomWidth RandomZoom ReLU Regularizer RepeatVector Rescaling Reshape Resizing SeparableConv1D
    SeparableConv2D SeparableConvolution1D SeparableConvolution2D Sequential SimpleRNN SimpleRNNCell
    Softmax SpatialDropout1D SpatialDropout2D SpatialDropout3D StackedRNNCells StringLookup Subtract
    SyncBatchNormalization TextVectorization ThresholdedReLU TimeDistributed TruncatedNormal
    TruncatedNormalV2 UnitNorm UnitNormalization UpSampling1D UpSampling2D UpSampling3D VarianceScaling
    VarianceScalingV2 Wrapper ZeroPadding1D ZeroPadding2D ZeroPadding3D Zeros ZerosV2 constant
    glorot_normal glorot_normalV2 glorot_uniform glorot_uniformV2 he_normal he_normalV2 he_uniform
    he_uniformV2 identity initializer l1 l2 lecun_normal lecun_normalV2 lecun_uniform lecun_uniformV2
    max_norm maxnorm min_max_norm non_neg nonneg normal one ones orthogonal orthogonal_regularizer
    radial_constraint random_normal random_uniform truncated_normal uniform unit_norm unitnorm
    variance_scaling zero zeros
    """.split()
)

# Classes Keras 3 may build (layers, operations, initializers...).
KERAS_CLASSES = frozenset(
    """
    AWQDTypePolicy Abs Absolute Activation ActivityRegularization AdaptiveAveragePool
    AdaptiveAveragePooling1D AdaptiveAveragePooling2D AdaptiveAveragePooling3D AdaptiveMaxPool
    AdaptiveMaxPooling1D AdaptiveMaxPooling2D AdaptiveMaxPooling3D Add AdditiveAttention AffineTransform
    All AllClose AlphaDropout Amax Amin Angle Any Append Arange Arccos Arccosh Arcsin Arcsinh Arctan
    Arctan2 Arctanh Argmax Argmin Argpartition Argsort Array ArraySplit Attention AugMix AutoContrast
    Average AveragePool AveragePooling1D AveragePooling2D AveragePooling3D BatchNorm BatchNormalization
    Bidirectional BinaryCrossentropy Bincount BitwiseAnd BitwiseInvert BitwiseLeftShift BitwiseNot
    BitwiseOr BitwiseRightShift BitwiseXor BroadcastTo CDist CTCDecode CTCLoss Cast
    CategoricalCrossentropy CategoryEncoding Cbrt Ceil Celu CenterCrop Cholesky CholeskyInverse Clip
    Concatenate Conj Conjugate Constant Constraint ContrastLimitedAdaptiveHistogramEqualization Conv
    Conv1D Conv1DTranspose Conv2D Conv2DTranspose Conv3D Conv3DTranspose ConvLSTM1D ConvLSTM2D
    ConvLSTM3D ConvTranspose ConvertToTensor Copy Corrcoef Correlate Cos Cosh CountNonzero CropImages
    Cropping1D Cropping2D Cropping3D Cross Cumprod Cumsum CutMix DTypePolicy DTypePolicyMap Deg2rad
    Dense DepthToSpace DepthwiseConv DepthwiseConv1D DepthwiseConv2D Det Diag Diagflat Diagonal Diff
    Digitize Discretization Divide DivideNoNan Dot DotProductAttention Dropout Dsplit Dstack ELU Eig
    Eigh Einsum EinsumDense ElasticTransform Elu Embedding EmptyLike Equal Equalization Erf Erfc Erfinv
    Exp Exp2 ExpandDims Expm1 ExtractPatches ExtractSequences FFT FFT2 Fabs Flatten Flip Fliplr Flipud
    FloatDTypePolicy Floor FloorDivide Fmax Fmin Fmod Fold Full FullLike Functional GPTQDTypePolicy GRU
    GRUCell GaussianBlur GaussianDropout GaussianNoise Gcd Gelu Geomspace GetItem GlobalAveragePooling1D
    GlobalAveragePooling2D GlobalAveragePooling3D GlobalMaxPooling1D GlobalMaxPooling2D
    GlobalMaxPooling3D GlorotNormal GlorotUniform Glu Greater GreaterEqual GroupNormalization
    GroupQueryAttention HSVToRGB HardShrink HardSigmoid HardSilu HardTanh HashedCrossing Hashing
    HeNormal HeUniform Heaviside Histogram Hsplit Hstack Hypot I0 IFFT2 IRFFT ISTFT Identity Imag InTopK
    Inner InputLayer Int4DTypePolicy IntegerLookup Inv IsIn Isclose Isfinite Isinf Isnan Isneginf
    Isposinf Isreal Kron L1 L1L2 L2 LSTM LSTMCell LayerNorm LayerNormalization Lcm Ldexp LeakyReLU
    LeakyRelu LecunNormal LecunUniform LeftShift Less LessEqual Linspace Log Log10 Log1p Log2 LogSigmoid
    LogSoftmax Logaddexp Logaddexp2 Logdet LogicalAnd LogicalNot LogicalOr LogicalXor Logspace Logsumexp
    Lstsq LuFactor MapCoordinates Masking Matmul MatrixRank Max MaxNorm MaxNumBoundingBoxes MaxPool
    MaxPooling1D MaxPooling2D MaxPooling3D Maximum Mean Median MelSpectrogram Meshgrid Min MinMaxNorm
    Minimum MixUp Mod Model Moments Moveaxis MultiHeadAttention MultiHot Multiply NanToNum Nanargmax
    Nanargmin Nancumprod Nancumsum Nanmax Nanmean Nanmedian Nanmin Nanpercentile Nanprod Nanquantile
    Nanstd Nansum Nanvar Ndim Negative Nextafter NonNeg Nonzero Norm Normalization Normalize NotEqual
    OneHot Ones OnesLike Orthogonal OrthogonalRegularizer Outer PReLU PSNR Pad PadImages Percentile
    Permute PerspectiveTransform Pinv Pipeline Polar Power Prod Ptp Qr Quantile QuantizedDTypePolicy
    QuantizedFloat8DTypePolicy RFFT RGBToGrayscale RGBToHSV RMSNorm RMSNormalization RNN Rad2deg
    RandAugment RandomBrightness RandomColorDegeneration RandomColorJitter RandomContrast RandomCrop
    RandomElasticTransform RandomErasing RandomFlip RandomGaussianBlur RandomGrayscale RandomHue
    RandomInvert RandomNormal RandomPerspective RandomPosterization RandomRotation RandomSaturation
    RandomSharpness RandomShear RandomTranslation RandomUniform RandomZoom Ravel ReLU Real Rearrange
    Reciprocal Relu Relu6 Repeat RepeatVector Rescaling Reshape Resize Resizing ReversibleEmbedding
    RightShift Roll Rot90 Round Rsqrt SSIM STFT STFTSpectrogram SVD SaturateCast ScaleAndTranslate
    Scatter ScatterUpdate SearchSorted SegmentMax SegmentMin SegmentProd SegmentReduction SegmentSum
    Select Selu SeparableConv SeparableConv1D SeparableConv2D Sequential Sigmoid Sign Signbit Silu
    SimpleRNN SimpleRNNCell Sin Sinc Sinh Size Slice SliceUpdate Slogdet SobelEdges SoftShrink Softmax
    Softplus Softsign Solarization Solve SolveTriangular Sort SpaceToDepth SparseCategoricalCrossentropy
    SparsePlus SparseSigmoid Sparsemax SpatialDropout1D SpatialDropout2D SpatialDropout3D
    SpectralNormalization Split Sqrt Square Squareplus Squeeze Stack StackedRNNCells Std StopGradient
    StringLookup Subtract Sum Swapaxes Take TakeAlongAxis Tan Tanh TanhShrink Tensordot
    TextVectorization Threshold Tile TimeDistributed TopK Trace Transpose Trapezoid Tril Triu TrueDivide
    Trunc TruncatedNormal Unfold Unique UnitNorm UnitNormalization UnravelIndex Unstack UpSampling1D
    UpSampling2D UpSampling3D Vander Var VarianceScaling Vdot View ViewAsComplex ViewAsReal Vsplit
    Vstack Where Wrapper ZeroPadding1D ZeroPadding2D ZeroPadding3D Zeros ZerosLike
    """.split()
)

# Functions a config may name (Keras' activations).
FUNCTIONS = frozenset(
    """
    celu elu exponential gelu glu hard_shrink hard_sigmoid hard_silu hard_swish hard_tanh leaky_relu
    linear log_sigmoid log_softmax mish relu relu6 selu sigmoid silu soft_shrink softmax softplus
    softsign sparse_plus sparse_sigmoid sparsemax squareplus swish tanh tanh_shrink threshold
    """.split()
)

# TensorFlow functions a TFOpLambda may call: pure tensor math.
TF_OP_SYMBOLS = frozenset(
    """
    __operators__.add __operators__.eq __operators__.getitem __operators__.ne
    __operators__.ragged_getitem abs acos acosh add add_n approx_top_k argmax argmin argsort as_string
    asin asinh assert_equal assert_greater assert_less assert_rank atan atan2 atanh batch_to_space
    bitcast bitwise.bitwise_and bitwise.bitwise_or bitwise.bitwise_xor bitwise.invert bitwise.left_shift
    bitwise.right_shift boolean_mask broadcast_dynamic_shape broadcast_static_shape broadcast_to cast
    clip_by_global_norm clip_by_norm clip_by_value complex concat constant conv
    conv2d_backprop_filter_v2 conv2d_backprop_input_v2 convert_to_tensor cos cosh cumsum divide
    dtypes.DType dtypes.as_dtype dtypes.cast dtypes.complex dtypes.saturate_cast edit_distance eig
    eigvals einsum ensure_shape equal exp expand_dims extract_volume_patches eye fftnd fill fingerprint
    floor gather gather_nd greater greater_equal guarantee_const histogram_fixed_width
    histogram_fixed_width_bins identity identity_n ifftnd image.ResizeMethod image.adjust_brightness
    image.adjust_contrast image.adjust_gamma image.adjust_hue image.adjust_jpeg_quality
    image.adjust_saturation image.central_crop image.combined_non_max_suppression
    image.convert_image_dtype image.crop_and_resize image.crop_to_bounding_box
    image.decode_and_crop_jpeg image.decode_bmp image.decode_gif image.decode_image image.decode_jpeg
    image.decode_jxl image.decode_png image.decode_webp image.draw_bounding_boxes image.encode_jpeg
    image.encode_png image.extract_glimpse image.extract_jpeg_shape image.extract_patches
    image.flip_left_right image.flip_up_down image.generate_bounding_box_proposals
    image.grayscale_to_rgb image.hsv_to_rgb image.image_gradients image.is_jpeg
    image.non_max_suppression image.non_max_suppression_overlaps image.non_max_suppression_padded
    image.non_max_suppression_with_scores image.pad_to_bounding_box image.per_image_standardization
    image.psnr image.random_brightness image.random_contrast image.random_crop
    image.random_flip_left_right image.random_flip_up_down image.random_hue image.random_jpeg_quality
    image.random_saturation image.resize image.resize_with_crop_or_pad image.resize_with_pad
    image.rgb_to_grayscale image.rgb_to_hsv image.rgb_to_yiq image.rgb_to_yuv image.rot90
    image.sample_distorted_bounding_box image.sobel_edges image.ssim image.ssim_multiscale
    image.stateless_random_brightness image.stateless_random_contrast image.stateless_random_crop
    image.stateless_random_flip_left_right image.stateless_random_flip_up_down
    image.stateless_random_hue image.stateless_random_jpeg_quality image.stateless_random_saturation
    image.stateless_sample_distorted_bounding_box image.total_variation image.transpose image.yiq_to_rgb
    image.yuv_to_rgb irfftnd less less_equal linalg.LinearOperator linalg.LinearOperatorAdjoint
    linalg.LinearOperatorBlockDiag linalg.LinearOperatorBlockLowerTriangular
    linalg.LinearOperatorCirculant linalg.LinearOperatorCirculant2D linalg.LinearOperatorCirculant3D
    linalg.LinearOperatorComposition linalg.LinearOperatorDiag linalg.LinearOperatorFullMatrix
    linalg.LinearOperatorHouseholder linalg.LinearOperatorIdentity linalg.LinearOperatorInversion
    linalg.LinearOperatorKronecker linalg.LinearOperatorLowRankUpdate
    linalg.LinearOperatorLowerTriangular linalg.LinearOperatorPermutation
    linalg.LinearOperatorScaledIdentity linalg.LinearOperatorToeplitz linalg.LinearOperatorTridiag
    linalg.LinearOperatorZeros linalg.adjoint linalg.band_part linalg.banded_triangular_solve
    linalg.cholesky linalg.cholesky_solve linalg.cross linalg.det linalg.diag linalg.diag_part
    linalg.eig linalg.eigh linalg.eigh_tridiagonal linalg.eigvals linalg.eigvalsh linalg.einsum
    linalg.experimental.conjugate_gradient linalg.expm linalg.eye linalg.global_norm linalg.inv
    linalg.l2_normalize linalg.logdet linalg.logm linalg.lstsq linalg.lu linalg.lu_matrix_inverse
    linalg.lu_reconstruct linalg.lu_solve linalg.matmul linalg.matrix_rank linalg.matrix_transpose
    linalg.matvec linalg.norm linalg.normalize linalg.pinv linalg.qr linalg.set_diag linalg.slogdet
    linalg.solve linalg.sqrtm linalg.svd linalg.tensor_diag linalg.tensor_diag_part linalg.tensordot
    linalg.trace linalg.triangular_solve linalg.tridiagonal_matmul linalg.tridiagonal_solve linspace
    logical_and logical_not logical_or math.abs math.accumulate_n math.acos math.acosh math.add
    math.add_n math.angle math.approx_max_k math.approx_min_k math.argmax math.argmin math.asin
    math.asinh math.atan math.atan2 math.atanh math.bessel_i0 math.bessel_i0e math.bessel_i1
    math.bessel_i1e math.betainc math.bincount math.ceil math.confusion_matrix math.conj math.cos
    math.cosh math.count_nonzero math.cumprod math.cumsum math.cumulative_logsumexp math.digamma
    math.divide math.divide_no_nan math.equal math.erf math.erfc math.erfcinv math.erfinv math.exp
    math.expm1 math.floor math.floordiv math.floormod math.greater math.greater_equal math.igamma
    math.igammac math.imag math.in_top_k math.invert_permutation math.is_finite math.is_inf math.is_nan
    math.is_non_decreasing math.is_strictly_increasing math.l2_normalize math.lbeta math.less
    math.less_equal math.lgamma math.log math.log1p math.log_sigmoid math.log_softmax math.logical_and
    math.logical_not math.logical_or math.logical_xor math.maximum math.minimum math.mod math.multiply
    math.multiply_no_nan math.ndtri math.negative math.nextafter math.not_equal math.polygamma
    math.polyval math.pow math.real math.reciprocal math.reciprocal_no_nan math.reduce_all
    math.reduce_any math.reduce_euclidean_norm math.reduce_logsumexp math.reduce_max math.reduce_mean
    math.reduce_min math.reduce_prod math.reduce_std math.reduce_sum math.reduce_variance math.rint
    math.round math.rsqrt math.scalar_mul math.segment_max math.segment_mean math.segment_min
    math.segment_prod math.segment_sum math.sigmoid math.sign math.sin math.sinh math.sobol_sample
    math.softmax math.softplus math.softsign math.special.bessel_i0 math.special.bessel_i0e
    math.special.bessel_i1 math.special.bessel_i1e math.special.bessel_j0 math.special.bessel_j1
    math.special.bessel_k0 math.special.bessel_k0e math.special.bessel_k1 math.special.bessel_k1e
    math.special.bessel_y0 math.special.bessel_y1 math.special.dawsn math.special.expint
    math.special.fresnel_cos math.special.fresnel_sin math.special.spence math.sqrt math.square
    math.squared_difference math.subtract math.tan math.tanh math.top_k math.truediv
    math.unsorted_segment_max math.unsorted_segment_mean math.unsorted_segment_min
    math.unsorted_segment_prod math.unsorted_segment_sqrt_n math.unsorted_segment_sum math.xdivy
    math.xlog1py math.xlogy math.zero_fraction math.zeta matmul matrix_square_root maximum meshgrid
    minimum multiply negative nn.RNNCellDeviceWrapper nn.RNNCellDropoutWrapper nn.RNNCellResidualWrapper
    nn.all_candidate_sampler nn.approx_max_k nn.approx_min_k nn.atrous_conv2d nn.atrous_conv2d_transpose
    nn.avg_pool nn.avg_pool1d nn.avg_pool2d nn.avg_pool3d nn.batch_norm_with_global_normalization
    nn.batch_normalization nn.bias_add nn.collapse_repeated nn.compute_accidental_hits
    nn.compute_average_loss nn.conv1d nn.conv1d_transpose nn.conv2d nn.conv2d_transpose nn.conv3d
    nn.conv3d_transpose nn.conv_transpose nn.convolution nn.crelu nn.ctc_beam_search_decoder
    nn.ctc_greedy_decoder nn.ctc_loss nn.ctc_unique_labels nn.depth_to_space nn.depthwise_conv2d
    nn.depthwise_conv2d_backprop_filter nn.depthwise_conv2d_backprop_input nn.dilation2d nn.dropout
    nn.elu nn.embedding_lookup nn.embedding_lookup_sparse nn.erosion2d nn.experimental.general_dropout
    nn.experimental.stateless_dropout nn.fixed_unigram_candidate_sampler nn.fractional_avg_pool
    nn.fractional_max_pool nn.gelu nn.in_top_k nn.isotonic_regression nn.l2_loss nn.l2_normalize
    nn.leaky_relu nn.learned_unigram_candidate_sampler nn.local_response_normalization
    nn.log_poisson_loss nn.log_softmax nn.lrn nn.max_pool nn.max_pool1d nn.max_pool2d nn.max_pool3d
    nn.max_pool_with_argmax nn.moments nn.nce_loss nn.normalize_moments nn.pool nn.relu nn.relu6
    nn.safe_embedding_lookup_sparse nn.sampled_softmax_loss nn.scale_regularization_loss nn.selu
    nn.separable_conv2d nn.sigmoid nn.sigmoid_cross_entropy_with_logits nn.silu nn.softmax
    nn.softmax_cross_entropy_with_logits nn.softplus nn.softsign nn.space_to_batch nn.space_to_depth
    nn.sparse_softmax_cross_entropy_with_logits nn.sufficient_statistics nn.swish nn.tanh nn.top_k
    nn.weighted_cross_entropy_with_logits nn.weighted_moments nn.with_space_to_batch nn.zero_fraction
    norm not_equal one_hot ones ones_like pad parallel_stack pow ragged.boolean_mask ragged.constant
    ragged.cross ragged.cross_hashed ragged.map_flat_values ragged.range
    ragged.row_splits_to_segment_ids ragged.segment_ids_to_row_splits ragged.stack
    ragged.stack_dynamic_partitions range rank realdiv reduce_all reduce_any reduce_logsumexp reduce_max
    reduce_mean reduce_min reduce_prod reduce_sum repeat required_space_to_batch_paddings reshape
    reverse reverse_sequence rfftnd roll round saturate_cast scalar_mul scatter_nd searchsorted
    sequence_mask sets.difference sets.intersection sets.size sets.union shape shape_n sigmoid sign
    signal.dct signal.fft signal.fft2d signal.fft3d signal.fftnd signal.fftshift signal.frame
    signal.hamming_window signal.hann_window signal.idct signal.ifft signal.ifft2d signal.ifft3d
    signal.ifftnd signal.ifftshift signal.inverse_mdct signal.inverse_stft signal.inverse_stft_window_fn
    signal.irfft signal.irfft2d signal.irfft3d signal.irfftnd signal.kaiser_bessel_derived_window
    signal.kaiser_window signal.linear_to_mel_weight_matrix signal.mdct
    signal.mfccs_from_log_mel_spectrograms signal.overlap_and_add signal.rfft signal.rfft2d
    signal.rfft3d signal.rfftnd signal.stft signal.vorbis_window sin sinh size slice sort space_to_batch
    space_to_batch_nd sparse.SparseTensor sparse.add sparse.bincount sparse.concat sparse.cross
    sparse.cross_hashed sparse.expand_dims sparse.eye sparse.fill_empty_rows sparse.from_dense
    sparse.map_values sparse.mask sparse.maximum sparse.minimum sparse.reduce_max sparse.reduce_sum
    sparse.reorder sparse.reset_shape sparse.reshape sparse.retain sparse.sampled_addmm
    sparse.segment_mean sparse.segment_sqrt_n sparse.segment_sum sparse.slice sparse.softmax
    sparse.sparse_dense_matmul sparse.split sparse.to_dense sparse.to_indicator sparse.transpose split
    sqrt square squeeze stack stop_gradient strided_slice strings.as_string strings.bytes_split
    strings.format strings.join strings.length strings.lower strings.ngrams strings.reduce_join
    strings.regex_full_match strings.regex_replace strings.split strings.strip strings.substr
    strings.to_hash_bucket strings.to_hash_bucket_fast strings.to_hash_bucket_strong strings.to_number
    strings.unicode_decode strings.unicode_decode_with_offsets strings.unicode_encode
    strings.unicode_script strings.unicode_split strings.unicode_split_with_offsets
    strings.unicode_transcode strings.unsorted_segment_join strings.upper subtract tan tanh
    tensor_scatter_nd_add tensor_scatter_nd_max tensor_scatter_nd_min tensor_scatter_nd_sub
    tensor_scatter_nd_update tensordot tile transpose truediv truncatediv truncatemod unique
    unique_with_counts unravel_index unstack where zeros zeros_like
    """.split()
)

# tf.RaggedTensor methods a ClassMethod may call.
RAGGED_CLASS_METHODS = frozenset(
    """
    from_nested_row_lengths from_nested_row_splits from_nested_value_rowids from_row_lengths
    from_row_limits from_row_splits from_row_starts from_sparse from_tensor from_uniform_row_length
    from_value_rowids
    """.split()
)

# What InstanceMethod/InstanceProperty may use.
KERAS_TENSOR_ATTRIBUTES = frozenset(
    """
    bounding_shape dense_shape flat_values indices merge_dims nested_row_lengths nested_row_splits
    nested_value_rowids nrows row_lengths row_limits row_splits row_starts to_sparse to_tensor
    value_rowids values with_flat_values with_row_splits_dtype with_values
    """.split()
)

# Registered TypeSpec names (tf-keras' JSON decoder).
TYPE_SPECS = frozenset(
    """
    tf.AnonymousExtensionType.Spec tf.BoundedTensorSpec tf.DynamicRaggedShape.Spec
    tf.EagerWeakTensor.Spec tf.GraphWeakTensor.Spec tf.NoneTensorSpec tf.RaggedTensorSpec
    tf.RowPartitionSpec tf.SparseTensorSpec tf.StructuredTensor.Spec tf.TensorArraySpec tf.TensorSpec
    tf.WeakTensor.Spec tf.linalg.LinearOperatorAdjointSpec tf.linalg.LinearOperatorBlockDiagSpec
    tf.linalg.LinearOperatorBlockLowerTriangularSpec tf.linalg.LinearOperatorCirculant2DSpec
    tf.linalg.LinearOperatorCirculant3DSpec tf.linalg.LinearOperatorCirculantSpec
    tf.linalg.LinearOperatorCompositionSpec tf.linalg.LinearOperatorDiagSpec
    tf.linalg.LinearOperatorFullMatrixSpec tf.linalg.LinearOperatorHouseholderSpec
    tf.linalg.LinearOperatorIdentitySpec tf.linalg.LinearOperatorInversionSpec
    tf.linalg.LinearOperatorKroneckerSpec tf.linalg.LinearOperatorLowRankUpdateSpec
    tf.linalg.LinearOperatorLowerTriangularSpec tf.linalg.LinearOperatorPermutationSpec
    tf.linalg.LinearOperatorScaledIdentitySpec tf.linalg.LinearOperatorToeplitzSpec
    tf.linalg.LinearOperatorTridiagSpec tf.linalg.LinearOperatorZerosSpec
    """.split()
)

# module.Class of the specs Keras' __typespec__ objects name.
TYPE_SPEC_CLASSES = frozenset(
    """
    tensorflow.python.framework.sparse_tensor.SparseTensorSpec
    tensorflow.python.framework.tensor.TensorSpec
    tensorflow.python.ops.ragged.ragged_tensor.RaggedTensorSpec
    """.split()
)
